package file

import (
	"google.golang.org/protobuf/proto"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apinetworking "istio.io/api/networking/v1alpha3"
)

// validateIstio checks an Istio object as the API server does with
// Istio's CRDs: its metadata, and the fields their schemas require.
// The schemas' CEL rules are not repeated here, except the shortest
// duration (istio_decode.go): what cannot work is refused by the
// conversions, which report it with the object's file and line.
func validateIstio(meta *metav1.ObjectMeta, spec proto.Message, hasSpec bool) field.ErrorList {
	// Custom resources are named like ConfigMaps: DNS subdomains.
	errs := apivalidation.ValidateObjectMeta(meta, true, apivalidation.NameIsDNSSubdomain, metadataPath)
	p := field.NewPath("spec")
	switch s := spec.(type) {
	case *apinetworking.DestinationRule:
		if s.GetHost() == "" {
			errs = append(errs, field.Required(p.Child("host"), "the service the rule applies to"))
		}
		for i, sub := range s.GetSubsets() {
			if sub.GetName() == "" {
				errs = append(errs, field.Required(p.Child("subsets").Index(i).Child("name"), ""))
			}
		}
	case *apinetworking.ServiceEntry:
		if !hasSpec {
			return append(errs, field.Required(p, ""))
		}
		if len(s.GetHosts()) == 0 {
			errs = append(errs, field.Required(p.Child("hosts"), ""))
		}
		for i, port := range s.GetPorts() {
			if port.GetNumber() == 0 {
				errs = append(errs, field.Required(p.Child("ports").Index(i).Child("number"), ""))
			}
			if port.GetName() == "" {
				errs = append(errs, field.Required(p.Child("ports").Index(i).Child("name"), ""))
			}
		}
	case *apinetworking.WorkloadEntry:
		if !hasSpec {
			errs = append(errs, field.Required(p, ""))
		}
	case *apinetworking.VirtualService:
		for i, h := range s.GetHttp() {
			for j, r := range h.GetRoute() {
				errs = append(errs, validateDestination(r.GetDestination(), p.Child("http").Index(i).Child("route").Index(j).Child("destination"))...)
			}
		}
		for i, t := range s.GetTcp() {
			for j, r := range t.GetRoute() {
				errs = append(errs, validateDestination(r.GetDestination(), p.Child("tcp").Index(i).Child("route").Index(j).Child("destination"))...)
			}
		}
		for i, t := range s.GetTls() {
			for j, r := range t.GetRoute() {
				errs = append(errs, validateDestination(r.GetDestination(), p.Child("tls").Index(i).Child("route").Index(j).Child("destination"))...)
			}
		}
	}
	return errs
}

func validateDestination(d *apinetworking.Destination, fld *field.Path) field.ErrorList {
	switch {
	case d == nil:
		return field.ErrorList{field.Required(fld, "")}
	case d.GetHost() == "":
		return field.ErrorList{field.Required(fld.Child("host"), "")}
	}
	return nil
}
