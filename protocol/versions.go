package protocol

// The protocol majors this host serves (versioning.md §1). Major 1 keeps the /v1/ path
// space; major 2 is the unversioned path space on the bare origin.
const (
	Major1 = 1
	Major2 = 2
)

// Versions of each major, as discovery lists them and the OpenWOP-Version response
// header names the contract that produced a response.
const (
	Version1 = "1.0"
	Version2 = "2.0"
)

// ProtocolVersions is discovery's protocolVersions[]: every <major>.<minor> served.
var ProtocolVersions = []string{Version1, Version2}

// PreferredVersion is discovery's preferredVersion: while a 1.x is listed it MUST be
// that 1.x (versioning.md §1.1), so a header-less discovery request is a v1 client's.
const PreferredVersion = Version1

// VersionOf names the contract of major m ("1.0" or "2.0").
func VersionOf(m int) string {
	if m == Major2 {
		return Version2
	}
	return Version1
}

// Served reports whether major m is one this host serves.
func Served(m int) bool { return m == Major1 || m == Major2 }

// ParseVersionHeader reads an OpenWOP-Version request value, "<major>" or
// "<major>.<minor>" (each ^(0|[1-9][0-9]*)$, surrounding spaces ignored); ok is false
// for anything else. Only the major selects (versioning.md §1.3).
func ParseVersionHeader(v string) (major int, ok bool) {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	maj, minor, hasMinor := v, "", false
	for i := 0; i < len(v); i++ {
		if v[i] == '.' {
			maj, minor, hasMinor = v[:i], v[i+1:], true
			break
		}
	}
	n, ok := decimal(maj)
	if !ok {
		return 0, false
	}
	if hasMinor {
		if _, ok := decimal(minor); !ok {
			return 0, false
		}
	}
	return n, true
}

// decimal reads a non-negative decimal without leading zeros, of at most 9 digits.
func decimal(s string) (int, bool) {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// Event-log eras (eventLogSchemaVersion, persistence.md §The era key): a run created
// before the era key reads as EraV1; every run created since is EraV2, whichever major
// created it, and its log is written in v2 vocabulary.
const (
	EraV1 = 2
	EraV2 = 3
)

// EraOf reads a recorded era: absent (0) is the v1 era, never backfilled.
func EraOf(recorded int) int {
	if recorded < EraV1 {
		return EraV1
	}
	return recorded
}

// EngineVersion is the engine version, an integer everywhere at v2 (versioning.md §2.1);
// the v1 log carries it as the string "wop/1".
const EngineVersion = 1

// EventSchemaVersion is the per-event schemaVersion of the events this host writes
// (events.md: integer, from 1).
const EventSchemaVersion = 1

// Org is this host's vendor org: the prefix of its extensions keys (wop.host), vendor
// error codes (wop.<code>) and vendor event types. It is not registered in the
// OpenWOP declaration yet; see docs/DECISIONS.md.
const Org = "wop"

// Header names of the version negotiation and of idempotent replays.
const (
	HeaderVersion          = "OpenWOP-Version"
	HeaderClientVersion    = "OpenWOP-Client-Version"
	HeaderIdempotentReplay = "OpenWOP-Idempotent-Replay"
)
