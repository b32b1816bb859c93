package serviceentry

import (
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
)

// The registry reads no security policies: the test store has none.

func (m *memStore) PeerAuthentications() []*securityv1.PeerAuthentication    { return nil }
func (m *memStore) AuthorizationPolicies() []*securityv1.AuthorizationPolicy { return nil }
func (m *memStore) PeerAuthentication(string, string) *securityv1.PeerAuthentication {
	return nil
}
func (m *memStore) AuthorizationPolicy(string, string) *securityv1.AuthorizationPolicy {
	return nil
}
