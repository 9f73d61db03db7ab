package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compiledSchema is a JSON Schema compiled once per run. Compilation and validation
// are pure functions of the schema and the instance (no loader reaches the network or
// the file system: only the in-memory resource is known), so using them in workflow
// code is deterministic.
type compiledSchema struct {
	sch *jsonschema.Schema
	err error
}

// validateAgainst validates value against schema; an empty schema accepts anything.
func (r *runner) validateAgainst(schema, value json.RawMessage) error {
	if len(schema) == 0 || string(schema) == "null" || string(schema) == "{}" {
		return nil
	}
	key := string(schema)
	cs, ok := r.schemaCache[key]
	if !ok {
		cs = compileSchema(schema)
		r.schemaCache[key] = cs
	}
	if cs.err != nil {
		return cs.err
	}
	if len(value) == 0 {
		value = json.RawMessage("null")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return fmt.Errorf("value is not JSON: %w", err)
	}
	if err := cs.sch.Validate(inst); err != nil {
		return err
	}
	return nil
}

func compileSchema(schema json.RawMessage) *compiledSchema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return &compiledSchema{err: fmt.Errorf("declared schema is not JSON: %w", err)}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	const url = "mem:///declared.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return &compiledSchema{err: fmt.Errorf("declared schema: %w", err)}
	}
	sch, err := c.Compile(url)
	if err != nil {
		return &compiledSchema{err: fmt.Errorf("declared schema does not compile: %w", err)}
	}
	return &compiledSchema{sch: sch}
}

// noLoader refuses every external reference, keeping validation free of I/O.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema reference %q is not allowed in a run", url)
}
