package protocol

// Subject is who a run belongs to at major 2 (identity.md §1, subject.schema.json, a
// closed object): the owner's trust root (Issuer), its stable opaque id in that root,
// its tenant, the lane that authenticated it and its kind.
type Subject struct {
	Issuer    string `json:"issuer"`
	SubjectID string `json:"subjectId"`
	Tenant    string `json:"tenant"`
	Lane      string `json:"lane"`
	Kind      string `json:"kind"`
}

// Subject issuers, lanes and kinds this host stamps.
const (
	// IssuerAPIKey is the trust root of this host's API keys (the api-key lane's realm,
	// advertised in discovery's auth.lanes[].issuers).
	IssuerAPIKey = "urn:wop:api-key"
	// IssuerLegacy marks a run created before the host recorded subjects (RFC 0170
	// §A.3): it reads with this issuer, and is never rewritten.
	IssuerLegacy = "urn:openwop:legacy"
	LaneAPIKey   = "api-key"
	KindUser     = "user"
	// IssuerTemporal is the trust root of the workflows that start runs through
	// Temporal (package agentclient, the Nexus service): their namespace's access
	// control authenticated them, and they act as workloads.
	IssuerTemporal = "urn:wop:temporal"
	LaneWorkload   = "workload"
	KindWorkload   = "workload"
)

// WorkloadSubject is the subject of a run a Temporal workflow started for tenant,
// named id by its caller (agentclient.Owner.Subject) or by the host.
func WorkloadSubject(tenant, id string) *Subject {
	return &Subject{Issuer: IssuerTemporal, SubjectID: id, Tenant: tenant, Lane: LaneWorkload, Kind: KindWorkload}
}

// APIKeySubject is the subject of a request authenticated by the API key keyID of
// tenant: the key's id is its subjectId (a name the operator chose, never the secret).
func APIKeySubject(tenant, keyID string) *Subject {
	return &Subject{Issuer: IssuerAPIKey, SubjectID: keyID, Tenant: tenant, Lane: LaneAPIKey, Kind: KindUser}
}

// LegacySubject is the stamp a run that recorded no subject reads with: the legacy
// issuer, the principal it recorded (or "unknown"), lane api-key and kind user (the
// only lane and kind this host has had).
func LegacySubject(tenant, principal string) *Subject {
	if principal == "" {
		principal = "unknown"
	}
	return &Subject{Issuer: IssuerLegacy, SubjectID: principal, Tenant: tenant, Lane: LaneAPIKey, Kind: KindUser}
}
