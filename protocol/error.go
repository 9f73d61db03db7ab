package protocol

import "encoding/json"

// RunError is the error of a failed run or node.
type RunError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details,omitempty"`
}
