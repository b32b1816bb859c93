// Command kubectl is Kubernetes' kubectl, built from k8s.io/kubectl exactly as
// k8s.io/kubernetes/cmd/kubectl builds it, so that meshpilot's tests can run
// the README's kubectl commands as written against the test API server.
//
// It lives in a module of its own, apart from tools/kube, so that building
// it never changes what tools/kube/build.sh stamps its binaries with.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	// Client auth plugins, as kubectl registers them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	// The verbosity is parsed before the command is built, as in kubectl's
	// own main, so that klog honours -v during construction too.
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) //nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
