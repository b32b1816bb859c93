package translate

import (
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
)

// The golden inputs hold no security policies yet: the store has none.

func (s *goldenIstioStore) PeerAuthentications() []*securityv1.PeerAuthentication { return nil }
func (s *goldenIstioStore) AuthorizationPolicies() []*securityv1.AuthorizationPolicy {
	return nil
}
func (s *goldenIstioStore) PeerAuthentication(string, string) *securityv1.PeerAuthentication {
	return nil
}
func (s *goldenIstioStore) AuthorizationPolicy(string, string) *securityv1.AuthorizationPolicy {
	return nil
}
