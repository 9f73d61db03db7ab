package devserver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ownerOnly makes the SQLite database and its journal files readable and writable by
// their owner only (0600): they hold every run's inputs and conversations. SQLite gives
// the journal files it creates later the database file's mode. A database created by an
// earlier version with a wider mode is narrowed too.
func ownerOnly(dbPath string) error {
	if dbPath == "" {
		return nil
	}
	for _, f := range []string{dbPath, dbPath + "-wal", dbPath + "-shm", dbPath + "-journal", dbPath + ".lock"} {
		if err := os.Chmod(f, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("restrict %s to its owner: %w", f, err)
		}
	}
	return nil
}
