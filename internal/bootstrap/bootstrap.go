// Package bootstrap writes xDS bootstrap files: what a proxyless gRPC
// workload reads (GRPC_XDS_BOOTSTRAP) to find meshpilot and to tell it who
// it is. The format is grpc-go's; grpc-js reads the same files.
package bootstrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshpilot/meshpilot/internal/model"
)

// Options describe the workload and the xDS server.
type Options struct {
	// XDSServer is meshpilot's xDS address, host:port. Required.
	XDSServer string
	// Namespace of the workload; default "default".
	Namespace string
	// Pod is the workload's name; default "client".
	Pod string
	// IP is the workload's address; default 127.0.0.1.
	IP string
	// NodeName is the Kubernetes node the workload runs on, sent as node
	// metadata NODE_NAME: endpoints that depend on the client's node
	// (internalTrafficPolicy Local, trafficDistribution PreferSameNode)
	// use it. Optional: meshpilot otherwise finds the node from the Pod
	// behind the workload's IP.
	NodeName string
	// DomainSuffix of the cluster, for the node id; default "cluster.local".
	DomainSuffix string
	// NodeID overrides Istio's form
	// "sidecar~<ip>~<pod>.<namespace>~<namespace>.svc.<domain suffix>".
	NodeID string
	// CACert enables TLS to the xDS server, verified with this CA file.
	CACert string
	// Cert and Key (together) are the workload's certificate, for mTLS to
	// the xDS server and as the default certificate provider.
	Cert, Key string
}

// ServerListenerTemplate is the name under which gRPC xDS servers ask for
// their inbound listener, Istio's; grpc-go puts its listening address in
// place of "%s".
const ServerListenerTemplate = model.InboundListenerPrefix + "%s"

// Config is the JSON document gRPC's xDS clients read.
type Config struct {
	XDSServers                         []Server                       `json:"xds_servers"`
	Node                               Node                           `json:"node"`
	CertificateProviders               map[string]CertificateProvider `json:"certificate_providers,omitempty"`
	ServerListenerResourceNameTemplate string                         `json:"server_listener_resource_name_template,omitempty"`
}

// Server is one xDS server.
type Server struct {
	ServerURI      string         `json:"server_uri"`
	ChannelCreds   []ChannelCreds `json:"channel_creds"`
	ServerFeatures []string       `json:"server_features"`
}

// ChannelCreds are the credentials of the channel to the xDS server.
type ChannelCreds struct {
	Type   string     `json:"type"`
	Config *TLSConfig `json:"config,omitempty"`
}

// TLSConfig is grpc-go's "tls" channel credentials and file_watcher
// certificate provider configuration (gRFC A65, A29).
type TLSConfig struct {
	CACertificateFile string `json:"ca_certificate_file,omitempty"`
	CertificateFile   string `json:"certificate_file,omitempty"`
	PrivateKeyFile    string `json:"private_key_file,omitempty"`
	RefreshInterval   string `json:"refresh_interval,omitempty"`
}

// CertificateProvider is a named certificate provider plugin.
type CertificateProvider struct {
	PluginName string     `json:"plugin_name"`
	Config     *TLSConfig `json:"config"`
}

// Node tells the xDS server who the client is.
type Node struct {
	ID string `json:"id"`
	// Locality is always written, empty when unknown: grpc-js-xds refuses a
	// bootstrap whose node has none ("locality field missing in node
	// element").
	Locality Locality          `json:"locality"`
	Metadata map[string]string `json:"metadata"`
}

// Locality is where the workload runs, as in the xDS Locality message.
type Locality struct {
	Region  string `json:"region,omitempty"`
	Zone    string `json:"zone,omitempty"`
	SubZone string `json:"sub_zone,omitempty"`
}

// Build checks the options and returns the bootstrap document.
func Build(o Options) (*Config, error) {
	if o.XDSServer == "" {
		return nil, errors.New("the xDS server address (host:port) is required")
	}
	host, port, err := net.SplitHostPort(o.XDSServer)
	if err != nil || host == "" {
		return nil, fmt.Errorf("xDS server %q: want host:port", o.XDSServer)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("xDS server %q: the port must be a number from 1 to 65535", o.XDSServer)
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		return nil, fmt.Errorf("namespace %q: %s", o.Namespace, msgs[0])
	}
	if o.Pod == "" {
		o.Pod = "client"
	}
	if msgs := validation.IsDNS1123Subdomain(o.Pod); len(msgs) > 0 {
		return nil, fmt.Errorf("pod %q: %s", o.Pod, msgs[0])
	}
	if o.IP == "" {
		o.IP = "127.0.0.1"
	}
	if _, err := netip.ParseAddr(o.IP); err != nil {
		return nil, fmt.Errorf("ip %q: not an IP address", o.IP)
	}
	o.DomainSuffix = model.DomainSuffixOrDefault(o.DomainSuffix)
	if o.NodeID == "" {
		o.NodeID = fmt.Sprintf("sidecar~%s~%s.%s~%s.svc.%s", o.IP, o.Pod, o.Namespace, o.Namespace, o.DomainSuffix)
	}
	if (o.Cert == "") != (o.Key == "") {
		return nil, errors.New("a client certificate needs both the certificate and the key file")
	}

	creds := ChannelCreds{Type: "insecure"}
	var tlsCfg *TLSConfig
	if o.CACert != "" || o.Cert != "" {
		tlsCfg = &TLSConfig{RefreshInterval: "600s"}
		for _, f := range []struct {
			in  string
			out *string
		}{{o.CACert, &tlsCfg.CACertificateFile}, {o.Cert, &tlsCfg.CertificateFile}, {o.Key, &tlsCfg.PrivateKeyFile}} {
			if f.in == "" {
				continue
			}
			// grpc-go opens the files relative to its own working folder.
			abs, err := filepath.Abs(f.in)
			if err != nil {
				return nil, err
			}
			*f.out = abs
		}
		creds = ChannelCreds{Type: "tls", Config: tlsCfg}
	}
	if o.NodeName != "" {
		if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
			return nil, fmt.Errorf("node name %q: %s", o.NodeName, msgs[0])
		}
	}
	cfg := &Config{
		XDSServers: []Server{{ServerURI: o.XDSServer, ChannelCreds: []ChannelCreds{creds}, ServerFeatures: []string{"xds_v3"}}},
		Node: Node{ID: o.NodeID, Metadata: map[string]string{
			"GENERATOR":    "grpc",
			"NAMESPACE":    o.Namespace,
			"INSTANCE_IPS": o.IP,
			"POD_NAME":     o.Pod,
		}},
		ServerListenerResourceNameTemplate: ServerListenerTemplate,
	}
	if o.NodeName != "" {
		cfg.Node.Metadata["NODE_NAME"] = o.NodeName
	}
	if tlsCfg != nil && tlsCfg.CertificateFile != "" {
		// The workload's certificate also serves xDS-configured TLS
		// (gRPC servers and clients with mTLS policies).
		cfg.CertificateProviders = map[string]CertificateProvider{
			"default": {PluginName: "file_watcher", Config: tlsCfg},
		}
	}
	return cfg, nil
}

// JSON returns the bootstrap document for o, indented.
func JSON(o Options) ([]byte, error) {
	cfg, err := Build(o)
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
