package gwstatus

import (
	"fmt"
	"regexp"
)

// controllerNamePattern is the Gateway API's rule for a controllerName
// (GatewayController): a domain, a slash, a path. The API server refuses
// a status entry whose controllerName breaks it, so a bad name is refused
// at start rather than on every write.
var controllerNamePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$`)

// CheckControllerName says whether name can be a route status entry's
// controllerName.
func CheckControllerName(name string) error {
	if len(name) == 0 || len(name) > 253 || !controllerNamePattern.MatchString(name) {
		return fmt.Errorf("%q is not a Gateway API controller name: want a domain, a slash and a path of at most 253 characters in all, e.g. %s", name, DefaultControllerName)
	}
	return nil
}
