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
	object      debug.ConfigObject
	field       configstatus.Field
}

func (p problem) String() string {
	obj := p.object.Kind + " " + p.object.Namespace + "/" + p.object.Name
	if p.object.Where != "" {
		obj += " " + p.object.Where
	}
	return fmt.Sprintf("%s [%s] (%s) %s: %s", p.level, p.code, obj, p.field.Path, p.field.Why)
}

// problems lists the problems of the objects as istioctl analyze lists
// its messages: errors (refusals) first, then what a kind of client does
// not get; each in object order.
func problems(objects []debug.ConfigObject) []problem {
	var errs, infos []problem
	for _, o := range objects {
		if o.Refused != nil {
			errs = append(errs, problem{"Error", "refused", o, *o.Refused})
		}
		for _, f := range o.IgnoredGRPC {
			infos = append(infos, problem{"Info", "ignored-for-grpc", o, f})
		}
		for _, f := range o.IgnoredEnvoy {
			infos = append(infos, problem{"Info", "ignored-for-envoy", o, f})
		}
	}
	return append(errs, infos...)
}

// printConfigProblems prints one line per problem and a summary; the
// error, when an object is refused, carries exitRefused.
func printConfigProblems(w io.Writer, objects []debug.ConfigObject) error {
	ps := problems(objects)
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
