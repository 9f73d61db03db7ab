package api

import (
	"crypto/sha256"
	"fmt"
	"os"
	"time"
)

// The keys the server accepts are its configured keys (Config.Keys, e.g. WOP_API_KEY)
// plus those of its keys file. Reloading builds a new keyStore and swaps it in
// atomically, so a request sees either the old keys or the new ones, never a mix; a file
// that does not parse changes nothing.

// loadKeys builds the first key store: the configured keys and the keys file's.
func (s *Server) loadKeys(static []Key) error {
	ks, err := newKeyStore(static)
	if err != nil {
		return err
	}
	s.staticKeys = ks.keys
	if s.cfg.KeysFile == "" {
		s.keys.Store(ks)
		return nil
	}
	raw, err := os.ReadFile(s.cfg.KeysFile)
	if err != nil {
		return fmt.Errorf("keys file: %w", err)
	}
	next, err := s.keysFrom(raw)
	if err != nil {
		return err
	}
	s.keys.Store(next)
	s.keysSum = sha256.Sum256(raw)
	return nil
}

// keysFrom builds the key store of the configured keys plus the keys file content raw.
func (s *Server) keysFrom(raw []byte) (*keyStore, error) {
	fileKeys, err := ParseKeys(s.cfg.KeysFile, raw)
	if err != nil {
		return nil, err
	}
	fs, err := newKeyStore(fileKeys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.cfg.KeysFile, err)
	}
	all := append([]keyEntry(nil), s.staticKeys...)
	for _, e := range fs.keys {
		for _, st := range s.staticKeys {
			if st.p.KeyID == e.p.KeyID {
				return nil, fmt.Errorf("%s: key name %q is also the id of a configured key (WOP_API_KEY's is \"env\")", s.cfg.KeysFile, e.p.KeyID)
			}
		}
		all = append(all, e)
	}
	return &keyStore{keys: all}, nil
}

// ReloadKeys reads the keys file again and, when it changed and parses, serves its
// keys from the next request on. When it does not parse, the keys read before stay
// and the error (with file and line) is logged and returned. Without a keys file it
// does nothing. `wop api` and `wop dev` call it on SIGHUP; the server also reloads
// by itself when the file changes.
func (s *Server) ReloadKeys() error {
	if s.cfg.KeysFile == "" {
		return nil
	}
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	raw, err := os.ReadFile(s.cfg.KeysFile)
	if err != nil {
		err = fmt.Errorf("keys file: %w", err)
		s.log.Error("Keys file not reloaded; the previous keys stay in use", "error", err)
		return err
	}
	sum := sha256.Sum256(raw)
	if sum == s.keysSum {
		return nil
	}
	next, err := s.keysFrom(raw)
	if err != nil {
		if sum != s.keysFailedSum {
			s.log.Error("Keys file not reloaded; the previous keys stay in use", "error", err)
		}
		s.keysFailedSum = sum
		return err
	}
	s.keys.Store(next)
	s.keysSum, s.keysFailedSum = sum, [sha256.Size]byte{}
	ended := s.sessions.reload(next, s.cfg.Now())
	s.log.Info("Keys file reloaded", "file", s.cfg.KeysFile, "keys", len(next.keys)-len(s.staticKeys), "requestsEnded", ended)
	return nil
}

// watchKeys reloads the keys file whenever its content changes, until the server
// shuts down. It reads the file every KeysFilePoll rather than relying on file system
// events, which miss the symlink swaps of mounted secrets and config maps.
func (s *Server) watchKeys() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.KeysFilePoll)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			_ = s.ReloadKeys()
		}
	}
}
