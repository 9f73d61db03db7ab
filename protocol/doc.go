// Package protocol holds the OpenWOP names the host speaks in more than one place:
// the error codes of the error envelope and of a run's error (codes.go), the event
// types of a run's event log (events.go), and what the two protocol majors need to
// agree on: the majors and eras (versions.go), the event codemap between the v1 and v2
// vocabularies (codemap.go), the v2 error registry and the v2 code of each host code
// (registry.go), tenant-bound ids and their path projection (ids.go), the owner's
// Subject (subject.go) and the webhook dispatcher's query the activities ask
// (webhooks.go). The tables come from the vendored OpenWOP files in spec/
// (generated into codemap_table.go and registry_table.go). It imports nothing, so the
// workflow code, the activities and the API share one spelling of each without
// depending on one another. Codes are domain values: the workflow code refuses or
// fails with a code, and the API alone decides the HTTP status it answers with
// (api/errors.go, statusOf; at major 2 the registry's status).
package protocol
