module github.com/meshpilot/meshpilot

go 1.26.0
