package chunks

import (
	"fmt"
	"os"
	"strings"
)

// identityMark separates a worker's Temporal identity from the chunk endpoint it
// advertises in it.
const identityMark = " chunks="

// Identity is the Temporal identity of a worker that serves chunks at endpoint: the
// SDK's default form (pid@host@) followed by the endpoint. Temporal records it as the
// identity of every task the worker takes (an activity attempt's last worker, a
// workflow task's started event), which is how an API process finds the worker that
// is running a round.
func Identity(endpoint string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d@%s@%s%s", os.Getpid(), host, identityMark, endpoint)
}

// EndpointOf returns the chunk endpoint a worker identity advertises, or "" when it
// advertises none (a worker without streaming, another SDK's worker).
func EndpointOf(identity string) string {
	_, ep, ok := strings.Cut(identity, identityMark)
	if !ok {
		return ""
	}
	ep = strings.TrimSpace(ep)
	if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
		return ""
	}
	return ep
}
