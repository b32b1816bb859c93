# A static, non-root image of meshpilot.
#   docker build -t meshpilot/meshpilot:latest .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/meshpilot ./cmd/meshpilot

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/meshpilot /meshpilot
USER 65532:65532
EXPOSE 15010 15014
ENTRYPOINT ["/meshpilot"]
