# meshpilot's image for Docker: a static binary on no base image, run as
# the non-root user 65532. hack/image.sh builds the same image with podman
# from hack/Containerfile, without the golang stage; a test checks that the
# two agree.
#   docker build --build-arg VERSION=v0.1.0 -t meshpilot/meshpilot:latest .
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
# The CA bundle (pinned roots), passwd and group of the image's root.
RUN go -C tools/image run . /out/rootfs

FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.source="https://github.com/meshpilot/meshpilot" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/rootfs/ /
COPY --from=build /out/meshpilot /meshpilot
USER 65532:65532
EXPOSE 15010 15014
ENTRYPOINT ["/meshpilot"]
