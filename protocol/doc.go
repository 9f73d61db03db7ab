// Package protocol holds the OpenWOP names the host speaks in more than one place:
// the error codes of the error envelope and of a run's error (codes.go), and the
// event types of a run's event log (events.go). It imports
// nothing, so the workflow code, the activities and the API share one spelling of
// each without depending on one another. Codes are domain values: the workflow code
// refuses or fails with a code, and the API alone decides the HTTP status it answers
// with (api/errors.go, statusOf).
package protocol
