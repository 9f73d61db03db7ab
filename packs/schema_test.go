package packs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// specDir is where the project's shared spec lives relative to this package; a standalone
// clone of the repository does not have it.
const specDir = "../../shared/spec"

// TestExamplePacksMatchOfficialSchema validates every example pack against the official
// schema file in the shared spec folder, decoding YAML independently of the loader.
func TestExamplePacksMatchOfficialSchema(t *testing.T) {
	schemaPath := filepath.Join(specDir, "promptpack.schema.json")
	data, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Skipf("official schema not found at %s (a clone without the shared spec folder): %v", schemaPath, err)
	}
	if !bytes.Equal(data, SchemaJSON) {
		t.Errorf("embedded schema/promptpack.schema.json differs from %s; copy it again", schemaPath)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("file:///promptpack.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("file:///promptpack.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("*.yaml")
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".mock.yaml") || isBindingsFile(f) {
			continue
		}
		n++
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := yaml.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("%s does not match the official schema:\n%v", f, err)
		}
	}
	if n < 3 {
		t.Errorf("checked %d example packs, want at least 3", n)
	}
}
