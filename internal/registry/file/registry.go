// Package file is meshpilot's file registry: it reads Kubernetes manifests
// (Namespace, Service, EndpointSlice, Pod, Node, and Istio's
// DestinationRule, VirtualService, ServiceEntry and WorkloadEntry; YAML
// with any number of documents, or JSON) from a folder and its subfolders
// and serves them as if they came from a cluster. Conversion is the Kubernetes registry's own
// (kubeconv.ConvertService, kubeconv.BuildEndpoints,
// kubeconv.ConvertWorkload), and a model.Store turns every reload into the
// same change events.
//
// The folder is watched: a saved edit is read again after a short quiet
// period, so editors that save in bursts or by renaming a temporary file
// into place cause one reload. The fields meshpilot reads are validated as
// the API server validates them (validate.go lists the few deliberate
// differences, such as loopback endpoint addresses being allowed). A
// file with any problem is reported with its document and field, and its
// last good content stays in force; other files are not affected. Objects
// defined in two files are reported and the first, in path order, wins.
//
// The Istio objects in force are a crd.Store (Istio, istio.go): the
// consumers of a cluster's Istio objects read a folder's the same way,
// and each reload emits an event for every Istio object it added,
// changed, moved or removed. The store is a crd.Locator, so that a
// consumer's status report on an object names its file, line and
// document.
package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/meshpilot/meshpilot/internal/model"
	"github.com/meshpilot/meshpilot/internal/registry/crd"
	"github.com/meshpilot/meshpilot/internal/registry/kubeconv"
)

// Options configure a Registry.
type Options struct {
	// Dir is the folder of manifests. Required.
	Dir string
	// DomainSuffix ends every hostname; default "cluster.local".
	DomainSuffix string
	// Settle is how long the folder must stay quiet after a change before
	// it is read again; default 50ms. Editors write a save as several
	// events within a few milliseconds.
	Settle time.Duration
	// MaxDelay bounds how long a steady stream of changes postpones a
	// reload; default 500ms.
	MaxDelay time.Duration
	// MaxFileBytes refuses a manifest file larger than this, with a
	// problem saying so (its last good content stays);
	// DefaultMaxFileBytes when zero.
	MaxFileBytes int64
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// DefaultMaxFileBytes is the largest manifest file read: far above a
// folder of thousands of Services in one file, and a bound on what one
// file (a log grown by mistake, a device) makes meshpilot read into
// memory, and then again at every change.
const DefaultMaxFileBytes = 64 << 20

// Registry serves the manifests of a folder. Its model methods are safe
// for concurrent use at any time; Run is called once.
type Registry struct {
	// store holds the model; only this registry writes it. Others read it
	// through the embedded view.
	store *model.Store
	model.StoreView

	opts Options
	// root opens the folder's files: a symlink is followed only while it
	// stays inside the folder (a ConfigMap volume's ..data links do), so
	// that a link cannot make meshpilot read and serve a file elsewhere
	// on its machine.
	root    *os.Root
	log     *slog.Logger
	runOnce sync.Once
	synced  atomic.Bool

	// Written by the Run goroutine only.
	files       map[string]*fileState
	watched     map[string]bool
	unwatchable map[string]bool // folders whose watch failed, logged once

	view     atomic.Pointer[view]
	istio    *IstioStore
	mu       sync.Mutex // guards problems
	problems []Problem
	reloads  atomic.Uint64
}

// fileState is what is known of one manifest file.
type fileState struct {
	data     []byte    // content last read
	parsed   []*Object // objects of data, when it parsed cleanly
	parseErr []Problem // problems of data
	good     []*Object // the last content that passed every check
	hasGood  bool
	reported string // problems last logged, to log each change once
}

// view is the set of objects in force, indexed for conversion.
type view struct {
	namespaces map[string]*corev1.Namespace
	services   map[string]*corev1.Service // "<namespace>/<name>"
	slices     map[string][]*discoveryv1.EndpointSlice
	pods       map[string]*kubeconv.PodInfo // "<namespace>/<name>"
	podNodes   map[string]bool              // the nodes Pods and endpoints are on
	podsByIP   map[string][]*kubeconv.PodInfo
	nodes      map[string]*corev1.Node
	// istio holds the Istio objects by kind and "<namespace>/<name>".
	istio map[crd.Kind]map[string]*Object
}

// New checks the folder and builds a Registry; Run reads and watches it.
func New(opts Options) (*Registry, error) {
	if opts.Dir == "" {
		return nil, errors.New("file registry: no folder given")
	}
	st, err := os.Stat(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("manifest folder: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("manifest folder %s is not a folder", opts.Dir)
	}
	opts.DomainSuffix = model.DomainSuffixOrDefault(opts.DomainSuffix)
	if opts.Settle <= 0 {
		opts.Settle = 50 * time.Millisecond
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = 500 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	root, err := os.OpenRoot(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("manifest folder: %w", err)
	}
	store := model.NewStore()
	r := &Registry{
		store:       store,
		StoreView:   store.View(),
		opts:        opts,
		root:        root,
		log:         opts.Logger.With("registry", "file"),
		files:       map[string]*fileState{},
		watched:     map[string]bool{},
		unwatchable: map[string]bool{},
	}
	r.view.Store(&view{})
	r.istio = &IstioStore{r: r}
	return r, nil
}

// HasSynced reports whether the folder has been read once and the first
// model is built.
func (r *Registry) HasSynced() bool { return r.synced.Load() }

// Problems returns what is currently wrong with the folder's files, in
// file order. Files with problems serve their last good content.
func (r *Registry) Problems() []Problem {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.problems)
}

// Reloads counts how many times the folder has been read.
func (r *Registry) Reloads() uint64 { return r.reloads.Load() }

// Run reads the folder, builds the model, then follows changes until ctx
// ends. It fails only when the folder cannot be watched.
func (r *Registry) Run(ctx context.Context) error {
	started := false
	r.runOnce.Do(func() { started = true })
	if !started {
		return errors.New("file registry: Run called twice")
	}
	defer r.root.Close()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", r.opts.Dir, err)
	}
	defer w.Close()

	// Watches are set up by the first reload, before anything is read, so
	// that no change after the read can be missed.
	start := time.Now()
	r.reload(w, time.Time{})
	r.synced.Store(true)
	svcs, eps := r.store.Len()
	r.log.Info("file registry synced", "dir", r.opts.Dir, "files", len(r.files), "services", svcs, "endpoints", eps,
		"problems", len(r.Problems()), "took", time.Since(start).Round(time.Millisecond))

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var pendingSince time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			r.log.Debug("folder changed", "event", ev.String())
			now := time.Now()
			if pendingSince.IsZero() {
				pendingSince = now
			}
			// A steady stream of writes must not postpone the reload
			// for ever.
			wait := min(r.opts.Settle, r.opts.MaxDelay-now.Sub(pendingSince))
			timer.Reset(max(wait, 0))
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			r.log.Warn("watching the manifest folder", "dir", r.opts.Dir, "error", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Events were lost: read everything again.
				timer.Reset(0)
			}
		case <-timer.C:
			// Change events carry the time of the first file event
			// of the batch: convergence is measured from the save.
			observed := pendingSince
			pendingSince = time.Time{}
			r.reload(w, observed)
		}
	}
}

// isManifest says whether a file name is one the registry reads.
func isManifest(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// scan walks the folder: manifest files in path order, and every folder
// to watch. Hidden folders are skipped: editors and Kubernetes' ConfigMap
// volumes keep their own copies there.
func (r *Registry) scan() (files, dirs []string) {
	_ = filepath.WalkDir(r.opts.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == r.opts.Dir {
				r.log.Error("reading the manifest folder", "dir", path, "error", err)
			}
			return nil
		}
		if d.IsDir() {
			if path != r.opts.Dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			dirs = append(dirs, path)
			return nil
		}
		if isManifest(d.Name()) {
			files = append(files, path)
		}
		return nil
	})
	return files, dirs
}

// syncWatches watches every folder found, including ones created since
// the last reload, and reports whether it added any.
func (r *Registry) syncWatches(w *fsnotify.Watcher, dirs []string) (added bool) {
	seen := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		seen[d] = true
		if r.watched[d] {
			continue
		}
		if err := w.Add(d); err != nil {
			if !r.unwatchable[d] {
				r.log.Warn("cannot watch folder; its changes will be seen only with others", "dir", d, "error", err)
				r.unwatchable[d] = true
			}
			continue
		}
		delete(r.unwatchable, d)
		r.watched[d] = true
		added = true
	}
	for d := range r.watched {
		if !seen[d] {
			_ = w.Remove(d) // usually gone already, with the folder
			delete(r.watched, d)
		}
	}
	return added
}

// reload reads the folder again and brings the model up to date; observed
// is when the change was first noticed (zero for the first read).
func (r *Registry) reload(w *fsnotify.Watcher, observed time.Time) {
	r.reloads.Add(1)
	paths, dirs := r.scan()
	// A file created in a new folder before its watch was set up would
	// go unseen: read the folders again until no new one appears.
	for w != nil && r.syncWatches(w, dirs) {
		paths, dirs = r.scan()
	}

	present := make(map[string]bool, len(paths))
	for _, path := range paths {
		data, err := r.readFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the walk
		}
		present[path] = true
		st := r.files[path]
		if st == nil {
			st = &fileState{}
			r.files[path] = st
		}
		if err != nil {
			st.data, st.parsed = nil, nil
			st.parseErr = []Problem{{File: path, Message: "cannot read: " + err.Error()}}
			continue
		}
		if st.data != nil && bytes.Equal(st.data, data) {
			continue
		}
		st.data = data
		st.parsed, st.parseErr = ParseFile(path, data)
		if st.parsed == nil && st.parseErr == nil {
			st.parsed = []*Object{} // an empty file is valid and holds nothing
		}
	}
	for path, st := range r.files {
		if !present[path] {
			r.log.Info("manifest file removed", "file", path, "objects", len(st.good))
			delete(r.files, path)
		}
	}

	order := slices.Sorted(func(yield func(string) bool) {
		for p := range r.files {
			if !yield(p) {
				return
			}
		}
	})
	before := r.view.Load()
	problems := r.compose(order)
	r.report(order, problems)
	r.updateModel(observed)
	r.istio.notify(before, r.view.Load())
}

// readFile reads a manifest of the folder through r.root, refusing a
// symlink that leads out of the folder and a file over MaxFileBytes.
func (r *Registry) readFile(path string) ([]byte, error) {
	rel, err := filepath.Rel(r.opts.Dir, path)
	if err != nil {
		return nil, err
	}
	f, err := r.root.Open(rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("a symlink that leads out of the folder (or is absolute) is not followed: %w", err)
		}
		return nil, err
	}
	defer f.Close()
	// Stat and a bounded read both: a file may grow between them, and
	// some (a FIFO, a device) have no size.
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > r.opts.MaxFileBytes {
		return nil, fmt.Errorf("%d bytes, over the limit of %d for a manifest file", fi.Size(), r.opts.MaxFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, r.opts.MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > r.opts.MaxFileBytes {
		return nil, fmt.Errorf("over the limit of %d bytes for a manifest file", r.opts.MaxFileBytes)
	}
	return data, nil
}

// compose decides what each file contributes, applying the checks that
// span files, and stores the resulting view.
func (r *Registry) compose(order []string) map[string][]Problem {
	problems := map[string][]Problem{}
	// What each file would contribute: its new content when it parsed
	// cleanly, else its last good content.
	candidate := map[string][]*Object{}
	isNew := map[string]bool{}
	for _, path := range order {
		st := r.files[path]
		if st.parseErr == nil {
			candidate[path], isNew[path] = st.parsed, true
		} else {
			candidate[path] = st.good
			problems[path] = append(problems[path], st.parseErr...)
		}
	}

	// References across files: an object's namespace must exist, as in a
	// cluster, and a slice's Service too, which a cluster does not ask
	// but without which the slice would serve nothing. A file whose new
	// content refers to nothing keeps its last good content.
	namespaces := map[string]bool{}
	for _, ns := range builtinNamespaces {
		namespaces[ns] = true
	}
	services := map[string]bool{}
	for _, path := range order {
		for _, o := range candidate[path] {
			switch o.Kind {
			case "Namespace":
				namespaces[o.Name] = true
			case "Service":
				services[o.Namespace+"/"+o.Name] = true
			}
		}
	}
	for _, path := range order {
		if !isNew[path] {
			continue
		}
		var refProblems []Problem
		for _, o := range candidate[path] {
			p := Problem{File: o.File, Document: o.Document, Line: o.Line}
			if o.Namespace != "" && !namespaces[o.Namespace] {
				p.Field = joinField(o.Prefix, "metadata.namespace")
				p.Message = fmt.Sprintf("Not found: namespace %q is not defined in any file (add a Namespace document)", o.Namespace)
				refProblems = append(refProblems, p)
				continue
			}
			if s, ok := o.Obj.(*discoveryv1.EndpointSlice); ok {
				svc := s.Labels[discoveryv1.LabelServiceName]
				if !services[s.Namespace+"/"+svc] {
					p.Field = joinField(o.Prefix, "metadata.labels[kubernetes.io/service-name]")
					p.Message = fmt.Sprintf("Not found: no Service %s/%s is defined in any file", s.Namespace, svc)
					refProblems = append(refProblems, p)
				}
			}
		}
		if len(refProblems) > 0 {
			problems[path] = append(problems[path], refProblems...)
			candidate[path] = r.files[path].good
			isNew[path] = false
		}
	}
	for _, path := range order {
		if isNew[path] {
			st := r.files[path]
			st.good, st.hasGood = st.parsed, true
		}
	}

	// Objects defined in several files: the first in path order wins.
	v := &view{
		namespaces: map[string]*corev1.Namespace{},
		services:   map[string]*corev1.Service{},
		slices:     map[string][]*discoveryv1.EndpointSlice{},
		pods:       map[string]*kubeconv.PodInfo{},
		podNodes:   map[string]bool{},
		podsByIP:   map[string][]*kubeconv.PodInfo{},
		nodes:      map[string]*corev1.Node{},
		istio:      map[crd.Kind]map[string]*Object{},
	}
	first := map[objectKey]*Object{}
	var pods []*corev1.Pod
	for _, path := range order {
		for _, o := range candidate[path] {
			if f, dup := first[o.key()]; dup {
				problems[path] = append(problems[path], Problem{File: o.File, Document: o.Document, Line: o.Line,
					Field: joinField(o.Prefix, "metadata.name"), duplicate: true,
					Message: fmt.Sprintf("Duplicate value: %q: %s is already defined in %s; that one is used", o.Name, o.describe(), f.where())})
				continue
			}
			first[o.key()] = o
			if pod, ok := o.Obj.(*corev1.Pod); ok {
				pods = append(pods, pod)
				continue
			}
			v.add(o)
		}
	}
	// Pods last: their labels depend on their Node's.
	for _, pod := range pods {
		v.addPod(pod)
	}
	r.view.Store(v)
	return problems
}

func (v *view) add(o *Object) {
	switch obj := o.Obj.(type) {
	case *corev1.Namespace:
		v.namespaces[obj.Name] = obj
	case *corev1.Service:
		v.services[obj.Namespace+"/"+obj.Name] = obj
	case *discoveryv1.EndpointSlice:
		key := obj.Namespace + "/" + obj.Labels[discoveryv1.LabelServiceName]
		v.slices[key] = append(v.slices[key], obj)
		for _, ep := range obj.Endpoints {
			if ep.NodeName != nil && *ep.NodeName != "" {
				v.podNodes[*ep.NodeName] = true
			}
		}
	case *corev1.Node:
		v.nodes[obj.Name] = obj
	default:
		_, gateway := gatewayKinds[o.Kind]
		if _, ok := istioKinds[o.Kind]; ok || gateway {
			k := crd.Kind(o.Kind)
			if v.istio[k] == nil {
				v.istio[k] = map[string]*Object{}
			}
			v.istio[k][o.Namespace+"/"+o.Name] = o
		}
	}
}

// addPod indexes a Pod with the labels a cluster would hold for it; its
// Node, if any, is in the view already.
func (v *view) addPod(pod *corev1.Pod) {
	if labels := admittedLabels(pod, v.nodes[pod.Spec.NodeName]); labels != nil {
		admitted := *pod // the parsed Pod is kept for later reloads: not changed
		admitted.Labels = labels
		pod = &admitted
	}
	info := kubeconv.NewPodInfo(pod)
	v.pods[pod.Namespace+"/"+pod.Name] = info
	if info.NodeName != "" {
		v.podNodes[info.NodeName] = true
	}
	for _, ip := range info.IPs {
		v.podsByIP[ip] = append(v.podsByIP[ip], info)
	}
}

// nodeTopologyLabels are the Node labels the API server copies onto a Pod
// when it is bound to the Node, overwriting the Pod's own (admission
// plugin PodTopologyLabels, on by default since Kubernetes 1.35).
var nodeTopologyLabels = []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion}

// admittedLabels returns the labels the API server would store for pod on
// node, or nil when they are the Pod's own. A cluster copies the labels
// once, when the Pod is bound; a folder has no such moment, so they follow
// the Node's current labels.
func admittedLabels(pod *corev1.Pod, node *corev1.Node) map[string]string {
	if node == nil {
		return nil
	}
	var out map[string]string
	for _, k := range nodeTopologyLabels {
		nv, ok := node.Labels[k]
		if !ok {
			continue
		}
		if pv, has := pod.Labels[k]; has && pv == nv {
			continue
		}
		if out == nil {
			out = maps.Clone(pod.Labels)
			if out == nil {
				out = map[string]string{}
			}
		}
		out[k] = nv
	}
	return out
}

// report logs each file's problems when they change, and keeps them for
// Problems.
func (r *Registry) report(order []string, problems map[string][]Problem) {
	var all []Problem
	for _, path := range order {
		st := r.files[path]
		ps := problems[path]
		all = append(all, ps...)
		var key strings.Builder
		for _, p := range ps {
			key.WriteString(p.Error())
			key.WriteByte('\n')
		}
		if key.String() == st.reported {
			continue
		}
		st.reported = key.String()
		if len(ps) == 0 {
			r.log.Info("manifest file is valid again", "file", path, "objects", len(st.good))
			continue
		}
		consequence := "nothing from this file is served until it is fixed"
		if st.hasGood {
			consequence = "the file's last good content stays in force"
		}
		for _, p := range ps {
			msg := "invalid manifest; " + consequence
			if p.duplicate {
				msg = "duplicate object ignored; the first definition is used"
			}
			r.log.Error(msg, "file", p.File, "document", p.Document, "line", p.Line, "field", p.Field, "error", p.Message)
		}
	}
	r.mu.Lock()
	r.problems = all
	r.mu.Unlock()
}

// updateModel converts every service of the view and updates the store,
// which emits events only for real changes.
func (r *Registry) updateModel(observed time.Time) {
	v := r.view.Load()
	lookup := kubeconv.EndpointLookup{Pod: v.pod, PodByIP: v.podByIP, Node: v.node}
	keep := map[model.Hostname]bool{}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range v.services {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		svc := kubeconv.ConvertService(v.services[k], r.opts.DomainSuffix)
		keep[svc.Hostname] = true
		eps := kubeconv.BuildEndpoints(svc, v.slices[k], lookup)
		if r.store.UpdateObserved(svc, eps, observed) {
			r.log.Debug("service updated", "service", svc.Hostname, "endpoints", len(eps))
		}
	}
	for _, svc := range r.store.Services() {
		if !keep[svc.Hostname] {
			r.store.DeleteObserved(svc.Hostname, observed)
		}
	}
}

func (v *view) pod(namespace, name string) *kubeconv.PodInfo { return v.pods[namespace+"/"+name] }

// podByIP applies the Kubernetes registry's rule (kubeconv.PodForIP).
func (v *view) podByIP(namespace, ip string) *kubeconv.PodInfo {
	return kubeconv.PodForIP(namespace, slices.Values(v.podsByIP[ip]))
}

func (v *view) node(name string) *corev1.Node { return v.nodes[name] }

// WorkloadByIP returns the Pod that holds ip (see kubeconv.PodForIP; of any
// namespace).
func (r *Registry) WorkloadByIP(ip string) *model.Workload {
	v := r.view.Load()
	p := v.podByIP("", ip)
	if p == nil {
		return nil
	}
	return kubeconv.ConvertWorkload(p, v.node(p.NodeName))
}

var (
	_ model.Controller     = (*Registry)(nil)
	_ model.WorkloadLookup = (*Registry)(nil)
)
