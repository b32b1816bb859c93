package metrics

import (
	"crypto/x509"

	"github.com/prometheus/client_golang/prometheus"
)

// WatchServingCertificate adds the gauge
// xds_certificate_expiry_timestamp_seconds{subject,serial}: when the
// certificate the xDS port serves new connections expires (Unix seconds),
// read from cert at each scrape, so that an alert sees a rotation that
// did not happen. cert returns nil when the port has no TLS. Call it
// once.
func (m *Metrics) WatchServingCertificate(cert func() *x509.Certificate) {
	m.registry.MustRegister(&servingCertificate{cert: cert, desc: prometheus.NewDesc(
		prometheus.BuildFQName(namespace, "xds", "certificate_expiry_timestamp_seconds"),
		"When the certificate the xDS port serves to new connections expires (notAfter, Unix seconds), by its subject and serial number (hexadecimal); it follows the rotations of --xds-cert.",
		[]string{"subject", "serial"}, nil)})
}

type servingCertificate struct {
	desc *prometheus.Desc
	cert func() *x509.Certificate
}

func (c *servingCertificate) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *servingCertificate) Collect(ch chan<- prometheus.Metric) {
	cert := c.cert()
	if cert == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(cert.NotAfter.Unix()),
		cert.Subject.String(), cert.SerialNumber.Text(16))
}

// WatchPermissionDenied adds the counter xds_permission_denied_total:
// xDS streams and REST requests refused because the client's certificate
// does not entitle it to the node it claims (--xds-client-ca), read from
// count at each scrape. Call it once.
func (m *Metrics) WatchPermissionDenied(count func() uint64) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "xds", Name: "permission_denied_total",
		Help: "xDS streams and REST requests refused with PermissionDenied (HTTP 403) because the client certificate's SPIFFE ID does not entitle the client to the node it claims (--xds-client-ca).",
	}, func() float64 { return float64(count()) }))
}
