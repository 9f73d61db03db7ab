package chat

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// kind is what a line of the conversation is; the view picks its marker and colour.
type kind int

const (
	kindAgent  kind = iota // the agent's reply: "speaker: text"
	kindUser               // a user turn from the run's history: "you: text"
	kindSystem             // a system turn or a note of the chat: "· text"
	kindTool               // a tool call: "  ⚙ name(args)"
	kindState              // a state change: "── state a → b (Event)"
	kindWait               // the run waits for something the chat does not send
	kindError              // a problem, written to the error stream
)

// ANSI styles of each kind (used only when colour is on).
var styles = map[kind]string{
	kindAgent:  "\x1b[1;36m", // the speaker, bold cyan
	kindUser:   "\x1b[1;32m", // the speaker, bold green
	kindSystem: "\x1b[2m",
	kindTool:   "\x1b[2;33m",
	kindState:  "\x1b[35m",
	kindWait:   "\x1b[33m",
	kindError:  "\x1b[31m",
}

const (
	ansiReset     = "\x1b[0m"
	ansiClearLine = "\r\x1b[K"
	promptText    = "you › "
)

// spinnerFrames is the thinking indicator.
var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// view draws the conversation. Every line goes through emit, which takes the thinking
// indicator and the prompt off the terminal's last line, writes the line, and puts
// them back, so lines that arrive while the user types never mix with the prompt. A
// reply that streams is written as it comes on an open line (streamText), which
// endStream or the next emit ends.
type view struct {
	mu       sync.Mutex
	out, err io.Writer
	// tty: out is a terminal, so the view shows a prompt and a thinking indicator and
	// redraws its last line; colour: ANSI colours too (not with NO_COLOR or TERM=dumb).
	tty, colour bool

	prompt   bool // input is expected: keep the prompt on the last line
	shown    bool // the prompt or the indicator is on the last line now
	thinking bool
	frame    int
	stop     chan struct{} // closes to stop the indicator's ticker
	// open: a streamed reply's line is being written (no newline yet); indent is the
	// width of its "speaker: " lead, for its continuation lines.
	open   bool
	indent int
}

// newView builds the view of out; colour follows the terminal and the environment.
func newView(out, errOut io.Writer, getenv func(string) string) *view {
	v := &view{out: out, err: errOut, tty: isTerminal(out)}
	v.colour = v.tty && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
	return v
}

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (v *view) paint(k kind, s string) string {
	if !v.colour || s == "" {
		return s
	}
	return styles[k] + s + ansiReset
}

// emit writes one line of kind k. For agent and user lines, speaker is painted and
// text follows it; continuation lines of a multi-line text are indented under it.
func (v *view) emit(k kind, speaker, text string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.endOpen()
	v.clearLast()
	var line string
	switch k {
	case kindAgent, kindUser:
		lead := speaker + ": "
		lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
		for i := 1; i < len(lines); i++ {
			if lines[i] != "" {
				lines[i] = strings.Repeat(" ", len([]rune(lead))) + lines[i]
			}
		}
		line = v.paint(k, lead) + strings.Join(lines, "\n")
	default:
		line = v.paint(k, text)
	}
	w := v.out
	if k == kindError {
		w = v.err
	}
	fmt.Fprintln(w, line)
	v.drawLast()
}

// streamText writes text of a streamed reply: the first piece opens the line
// "speaker: ", later ones continue it.
func (v *view) streamText(speaker, text string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.open {
		v.clearLast()
		lead := speaker + ": "
		fmt.Fprint(v.out, v.paint(kindAgent, lead))
		v.open, v.indent = true, len([]rune(lead))
	}
	fmt.Fprint(v.out, strings.ReplaceAll(text, "\n", "\n"+strings.Repeat(" ", v.indent)))
}

// endStream ends the streamed reply's line, with note after it when not empty.
func (v *view) endStream(note string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.open {
		return
	}
	if note != "" {
		fmt.Fprint(v.out, " "+v.paint(kindSystem, note))
	}
	v.endOpen()
	v.drawLast()
}

// endOpen ends an open streamed line. Callers hold mu.
func (v *view) endOpen() {
	if v.open {
		fmt.Fprintln(v.out)
		v.open = false
	}
}

// clearLast removes the prompt or the indicator from the last line. Callers hold mu.
func (v *view) clearLast() {
	if v.tty && v.shown {
		fmt.Fprint(v.out, ansiClearLine)
		v.shown = false
	}
}

// drawLast puts the indicator, or the prompt when input is expected, on the last line.
// Callers hold mu.
func (v *view) drawLast() {
	if !v.tty || v.open {
		return
	}
	switch {
	case v.thinking:
		fmt.Fprint(v.out, v.paint(kindSystem, spinnerFrames[v.frame%len(spinnerFrames)]+" thinking…"))
		v.shown = true
	case v.prompt:
		fmt.Fprint(v.out, v.paint(kindUser, promptText))
		v.shown = true
	}
}

// expectInput shows (or hides) the prompt.
func (v *view) expectInput(on bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clearLast()
	v.prompt = on
	v.drawLast()
}

// lineEntered records that the user pressed Enter: the prompt's line is theirs now.
func (v *view) lineEntered() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.shown = false
}

// startThinking shows the indicator until stopThinking (on a terminal only).
func (v *view) startThinking() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.tty || v.thinking {
		return
	}
	v.clearLast()
	v.thinking = true
	v.stop = make(chan struct{})
	v.drawLast()
	go v.spin(v.stop)
}

func (v *view) spin(stop chan struct{}) {
	t := time.NewTicker(120 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			v.mu.Lock()
			if v.thinking {
				v.frame++
				v.clearLast()
				v.drawLast()
			}
			v.mu.Unlock()
		}
	}
}

// stopThinking removes the indicator.
func (v *view) stopThinking() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.thinking {
		return
	}
	close(v.stop)
	v.clearLast()
	v.thinking = false
	v.drawLast()
}

// close takes the prompt and the indicator off the terminal for good.
func (v *view) close() {
	v.endStream("")
	v.stopThinking()
	v.expectInput(false)
}
