# A static, non-root image of meshpilot.
#   docker build -t meshpilot/meshpilot:latest .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# grpcnotrace: grpc-go without golang.org/x/net/trace, which meshpilot never
# serves and whose HTML templates, able to call any method by name, stop the
# linker from dropping unused methods: 30 % of the binary, 6 MiB of idle RSS.
RUN CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -ldflags "-s -w -X main.version=${VERSION}" -o /out/meshpilot ./cmd/meshpilot

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/meshpilot /meshpilot
USER 65532:65532
EXPOSE 15010 15014
ENTRYPOINT ["/meshpilot"]
