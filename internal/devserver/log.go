package devserver

import (
	"context"
	"log/slog"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// serverLogger adapts a *slog.Logger to the Temporal server's log.Logger. Its level is
// a LevelVar so Stop can raise it to error before the server's noisy shutdown.
type serverLogger struct {
	out   *slog.Logger
	level *slog.LevelVar
	tags  []tag.Tag
}

var _ log.Logger = serverLogger{}
var _ log.WithLogger = serverLogger{}

func (l serverLogger) Debug(msg string, tags ...tag.Tag) { l.log(slog.LevelDebug, msg, tags) }
func (l serverLogger) Info(msg string, tags ...tag.Tag)  { l.log(slog.LevelInfo, msg, tags) }
func (l serverLogger) Warn(msg string, tags ...tag.Tag)  { l.log(slog.LevelWarn, msg, tags) }
func (l serverLogger) Error(msg string, tags ...tag.Tag) { l.log(slog.LevelError, msg, tags) }

// DPanic, Panic and Fatal are logged as errors: an embedded server must never panic or
// exit the host process. The port checks in Start prevent the known fatal paths.
func (l serverLogger) DPanic(msg string, tags ...tag.Tag) { l.log(slog.LevelError, msg, tags) }
func (l serverLogger) Panic(msg string, tags ...tag.Tag)  { l.log(slog.LevelError, msg, tags) }
func (l serverLogger) Fatal(msg string, tags ...tag.Tag)  { l.log(slog.LevelError, msg, tags) }

// With returns a logger that prepends tags to every entry.
func (l serverLogger) With(tags ...tag.Tag) log.Logger {
	all := make([]tag.Tag, 0, len(l.tags)+len(tags))
	all = append(append(all, l.tags...), tags...)
	return serverLogger{out: l.out, level: l.level, tags: all}
}

func (l serverLogger) log(level slog.Level, msg string, tags []tag.Tag) {
	if level < l.level.Level() || !l.out.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(l.tags)+len(tags)+1)
	attrs = append(attrs, slog.String("component", "temporal"))
	for _, t := range l.tags {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	for _, t := range tags {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	l.out.LogAttrs(context.Background(), level, msg, attrs...)
}
