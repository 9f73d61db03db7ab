package devserver

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// fileLock guards one SQLite file against a second server process: two servers on one
// file both start without error and then fight over the history shard.
type fileLock struct {
	f *os.File
}

// lockFile takes the lock at path (created if missing) and writes the pid into it.
func lockFile(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot create lock file: %w", err)
	}
	ok, err := tryLock(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	if !ok {
		raw, _ := os.ReadFile(path)
		_ = f.Close()
		holder := strings.TrimSpace(string(raw))
		if holder == "" {
			holder = "unknown"
		}
		return nil, &LockedError{Path: path, PID: holder}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &fileLock{f: f}, nil
}

func (l *fileLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = unlock(l.f)
	_ = l.f.Close()
	l.f = nil
}

// LockedError reports that another process already serves the database file.
type LockedError struct {
	Path string
	PID  string
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("the Temporal database is in use by another process (pid %s, lock %s); stop it or use another data folder", e.PID, e.Path)
}
