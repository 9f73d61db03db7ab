package main

import (
	"fmt"
	"io"

	"github.com/wop-dev/wop/tools"
)

// printTools writes the Tools lines of a banner: how many pack tools are bound and from
// which file, each bound tool with its target, and the unbound ones as a warning.
func printTools(w io.Writer, file string, r *tools.Report) {
	if r == nil {
		return
	}
	from := "no bindings file"
	if file != "" {
		from = "bindings from " + file
	}
	fmt.Fprintf(w, "  Tools        %d bound, %d unbound (%s)\n", len(r.Bound), len(r.Unbound), from)
	r.Print(w, "                 ")
}
