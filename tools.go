//go:build tools

// This file keeps the project's pinned modules in go.mod while the packages that use
// them are being written; `go mod tidy` reads files of every build tag.
package tools

import (
	_ "github.com/anthropics/anthropic-sdk-go/v2"
	_ "github.com/labstack/echo/v4"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/temporalio/ui-server/v2/server"
	_ "go.temporal.io/server/temporal"
	_ "gopkg.in/yaml.v3"
)
