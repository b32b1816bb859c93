package meshconfig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settle is how long the file must be quiet before it is read again: an
// editor's save is several events (write, rename, chmod).
const settle = 50 * time.Millisecond

// FromFile returns a Watcher of the MeshConfig file path, read at once: a
// file that does not parse is an error here, since there is no last good
// config yet. Run follows its changes.
func FromFile(path string, log *slog.Logger) (*Watcher, error) {
	w := newWatcher(log, "file "+path)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the mesh config: %w", err)
	}
	if err := w.apply(data); err != nil {
		return nil, fmt.Errorf("mesh config %s: %w", path, err)
	}
	w.markSynced()
	w.run = func(ctx context.Context) error { return w.followFile(ctx, path) }
	return w, nil
}

// followFile watches the file's folder, not the file: editors and
// Kubernetes' ConfigMap volumes replace a file (rename, symlink swap),
// which ends a watch on the file itself.
func (w *Watcher) followFile(ctx context.Context, path string) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching the mesh config %s: %w", path, err)
	}
	defer fw.Close()
	if err := fw.Add(filepath.Dir(path)); err != nil {
		return fmt.Errorf("watching the mesh config %s: %w", path, err)
	}
	// A change between the first read and the watch would be missed:
	// read again once the file has been quiet for a while.
	timer := time.NewTimer(settle)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-fw.Events:
			if !ok {
				return nil
			}
			// Any event of the folder: a ConfigMap volume changes the
			// file through a symlink whose own events name ..data.
			timer.Reset(settle)
		case err, ok := <-fw.Errors:
			if !ok {
				return nil
			}
			w.log.Warn("watching the mesh config", "file", path, "error", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				timer.Reset(0)
			}
		case <-timer.C:
			w.reread(path)
		}
	}
}

// reread applies the file's content; a missing file (between an editor's
// remove and create, say) keeps the config in force.
func (w *Watcher) reread(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		w.log.Warn("mesh config unreadable; the last good one stays in force", "file", path, "error", err)
		return
	}
	_ = w.apply(data)
}
