package api

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaDir holds the OpenWOP JSON schemas the responses are validated against.
const schemaDir = "../../shared/spec/schemas"

const schemaBase = "https://openwop.dev/spec/v1/"

// stubLoader serves every local schema under its $id and an empty schema ({}) for the
// external documents the folder does not carry (schemas/README.md).
type stubLoader struct{}

func (stubLoader) Load(url string) (any, error) {
	name := strings.TrimPrefix(url, schemaBase)
	if !strings.Contains(name, "/") {
		if b, err := os.ReadFile(filepath.Join(schemaDir, name)); err == nil {
			return jsonschema.UnmarshalJSON(bytes.NewReader(b))
		}
	}
	return map[string]any{}, nil
}

var (
	schemaOnce     sync.Once
	schemaCompiler *jsonschema.Compiler
	schemaCache    = map[string]*jsonschema.Schema{}
	schemaMu       sync.Mutex
)

// validateSchema validates doc (JSON bytes) against the named schema file, optionally
// at a JSON pointer fragment ("run-event-payloads.schema.json#/$defs/runStarted").
func validateSchema(t testing.TB, loc string, doc []byte) {
	t.Helper()
	if _, err := os.Stat(schemaDir); err != nil {
		t.Skipf("schema folder %s is absent; response bodies not validated", schemaDir)
	}
	schemaOnce.Do(func() {
		schemaCompiler = jsonschema.NewCompiler()
		schemaCompiler.UseLoader(stubLoader{})
	})
	schemaMu.Lock()
	sch, ok := schemaCache[loc]
	if !ok {
		var err error
		sch, err = schemaCompiler.Compile(schemaBase + loc)
		if err != nil {
			schemaMu.Unlock()
			t.Fatalf("compiling schema %s: %v", loc, err)
		}
		schemaCache[loc] = sch
	}
	schemaMu.Unlock()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("response is not JSON: %v: %s", err, doc)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("response does not validate against %s: %v\n%s", loc, err, doc)
	}
}

// validateEnvelope checks an error body against error-envelope.schema.json and
// returns its decoded form.
func validateEnvelope(t testing.TB, body []byte) envelope {
	t.Helper()
	validateSchema(t, "error-envelope.schema.json", body)
	var e envelope
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body is not an envelope: %v: %s", err, body)
	}
	return e
}
