package workflows

// EventsRecordMagic exposes the prefix of a compressed events record to the external
// tests of this directory (the replay tests, which register the webhook workflows too
// and so cannot be in this package).
const EventsRecordMagic = eventsRecordMagic
