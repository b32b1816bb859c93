//go:build !unix

package xds

import "net"

// readyRead is shed_read.go's, on Unix only: elsewhere grpc-go gives
// each connection a read buffer (connReadBuffer).
type readyRead struct{}

func (*readyRead) init(net.Conn) {}
