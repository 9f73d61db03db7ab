# Production image of `wop worker` and `wop api`. Built with -tags nodev: the binary
# leaves out the embedded Temporal server and UI that only `wop dev` uses.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN go build -tags nodev -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/wop ./cmd/wop \
 && mkdir -p /out/packs \
 && find packs -maxdepth 1 -type f \( -name '*.yaml' -o -name '*.yml' -o -name '*.json' \) -exec cp {} /out/packs/ \;

FROM gcr.io/distroless/static-debian12:nonroot
WORKDIR /app
COPY --from=build /out/wop /app/wop
COPY --from=build /out/packs /app/packs
ENV WOP_PACKS=/app/packs
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/app/wop"]
CMD ["help"]
