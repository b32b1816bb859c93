package main

import (
	"fmt"
	"io"

	"github.com/meshpilot/meshpilot/internal/configstatus"
	"github.com/meshpilot/meshpilot/internal/debug"
)

// exitRefused is the exit code of `status config` when an object is
// refused: istioctl analyze's when it finds issues, so that scripts
// written for one work with the other. Other failures exit 1.
const exitRefused = 79

// exitError is an error that ends the command with its own exit code.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }
func (e exitError) ExitCode() int { return e.code }

// problem is one line of `status config`.
type problem struct {
	level, code string
	// subject names what the problem is about: "KIND NAMESPACE/NAME",
	// with the file an object was read from, or "Service HOSTNAME".
	subject string
	field   configstatus.Field
}

func (p problem) String() string {
	return fmt.Sprintf("%s [%s] (%s) %s: %s", p.level, p.code, p.subject, p.field.Path, p.field.Why)
}

// objectName names an object in a problem line.
func objectName(o debug.ConfigObject) string {
	obj := o.Kind + " " + o.Namespace + "/" + o.Name
	if o.Where != "" {
		obj += " " + o.Where
	}
	return obj
}

// problems lists the problems of the configuration as istioctl analyze
// lists its messages: errors (refusals) first, then warnings (services
// whose ports differ between clusters), then what a kind of client does
// not get; each in object (or hostname) order.
func problems(z debug.Configz) []problem {
	var errs, warnings, infos []problem
	for _, o := range z.Objects {
		if o.Refused != nil {
			errs = append(errs, problem{"Error", "refused", objectName(o), *o.Refused})
		}
		for _, f := range o.IgnoredGRPC {
			infos = append(infos, problem{"Info", "ignored-for-grpc", objectName(o), f})
		}
		for _, f := range o.IgnoredEnvoy {
			infos = append(infos, problem{"Info", "ignored-for-envoy", objectName(o), f})
		}
		for _, f := range o.Merged {
			infos = append(infos, problem{"Info", "merged", objectName(o), f})
		}
	}
	for _, c := range z.ServiceConflicts {
		warnings = append(warnings, problem{"Warning", "ports-differ", "Service " + string(c.Hostname),
			configstatus.Field{Path: "spec.ports", Why: c.Why}})
	}
	return append(append(errs, warnings...), infos...)
}

// printConfigProblems prints one line per problem and a summary; the
// error, when an object is refused, carries exitRefused. Port conflicts
// are warnings: they do not change the exit code.
func printConfigProblems(w io.Writer, z debug.Configz) error {
	objects := z.Objects
	ps := problems(z)
	for _, p := range ps {
		if _, err := fmt.Fprintln(w, p); err != nil {
			return err
		}
	}
	counts := map[string]int{}
	for _, o := range objects {
		counts[o.State]++
	}
	if len(ps) == 0 {
		_, err := fmt.Fprintf(w, "✔ No problems found in %s.\n", plural(len(objects), "Istio object"))
		return err
	}
	if _, err := fmt.Fprintf(w, "%s: %d refused, %d partial, %d applied.\n", plural(len(objects), "Istio object"),
		counts[configstatus.StateRefused], counts[configstatus.StatePartial], counts[configstatus.StateApplied]); err != nil {
		return err
	}
	if n := len(z.ServiceConflicts); n > 0 {
		if _, err := fmt.Fprintf(w, "%s with ports that differ between clusters: the first definition of each is served.\n", plural(n, "service")); err != nil {
			return err
		}
	}
	if n := counts[configstatus.StateRefused]; n > 0 {
		return exitError{code: exitRefused, msg: fmt.Sprintf("%s refused: not applied, the last good version of each stays in force", plural(n, "object"))}
	}
	return nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
