package workflows

import "github.com/wop-dev/wop/packs"

// EventsRecordMagic exposes the prefix of a compressed events record to the external
// tests of this directory (the replay tests, which register the webhook workflows too
// and so cannot be in this package).
const EventsRecordMagic = eventsRecordMagic

// ServePack is packagent.Serve. The pack agent's package imports this one, so the
// tests of this package that run packs reach it through ServePack, which
// packagent_test.go (an external test of this directory) sets as it registers the
// agent, before any test runs.
var ServePack func(*packs.Pack) ServedPack
