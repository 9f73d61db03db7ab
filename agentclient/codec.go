package agentclient

import (
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/internal/payloadcodec"
)

// DataConverter is the data converter of a caller's Temporal client when the host seals
// its payloads (WOP_PAYLOAD_KEYS_FILE): the host's workers seal what its activities
// return and what its runs and Nexus operations answer, so a caller reads replies and
// outcomes only with the same keys. keysFile is the host's keys file; "" gives
// Temporal's default converter (a host without encryption).
func DataConverter(keysFile string) (converter.DataConverter, error) {
	if keysFile == "" {
		return converter.GetDefaultDataConverter(), nil
	}
	c, err := payloadcodec.Load(keysFile)
	if err != nil {
		return nil, err
	}
	return payloadcodec.DataConverter(c), nil
}
