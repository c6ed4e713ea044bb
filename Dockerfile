# roomkit in a container, for operators who run their services that way.
#
# The container must be privileged: instances are gVisor sandboxes with their own network
# namespaces, nftables rules, loop-mounted disks, overlay mounts and cgroups, all made
# from inside it. The data directory must be a volume (an overlay mount cannot have its
# upper directory on the container's own overlay root):
#
#   docker build -t roomkit .
#   docker run -d --name roomkit --privileged --stop-timeout 45 \
#     -v roomkit-data:/var/lib/roomkit -p 127.0.0.1:8080:8080 roomkit
#   docker exec roomkit roomkit keys create --org acme
#
# One SIGTERM (docker stop) reaches the service once, through tini, and gives one
# graceful shutdown; the service allows itself 30 s for it, so give docker more than its
# default 10 s (--stop-timeout 45 above). Instances do not outlive the container, so it
# stops them on shutdown (ROOMKIT_ON_SHUTDOWN=stop).
FROM debian:bookworm-slim

ENV DEBIAN_FRONTEND=noninteractive
# What scripts/setup installs for instances (mmdebstrap ... tini), and npm, with which it
# fetches Node.js 24 (Debian's own Node is older). runsc comes pinned, from Debian trixie
# alone, by scripts/setup-runsc (run by scripts/setup below).
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates npm \
      mmdebstrap nftables iproute2 e2fsprogs btrfs-progs util-linux mount gcc libc6-dev tini golang-go \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/roomkit
# Dependencies first, so that a change to the sources reuses this layer.
COPY package.json package-lock.json ./
COPY sdk/package.json sdk/package.json
COPY scripts/setup scripts/setup-runsc scripts/
COPY packaging/runsc-version packaging/runsc-version
RUN scripts/setup && npm cache clean --force && rm -rf /var/lib/apt/lists/*

COPY tsconfig.json ./
COPY bin bin
COPY src src
COPY sdk sdk
COPY scripts scripts
COPY packaging packaging
# The web console's pages, bundled once here (scripts/setup above ran before they were copied).
COPY console console
RUN "$(cat .tools/node-path)" console/build.ts
RUN ln -s /opt/roomkit/packaging/roomkit-exec /usr/local/bin/roomkit

ENV ROOMKIT_HOST=0.0.0.0 \
    ROOMKIT_PORT=8080 \
    ROOMKIT_DATA_DIR=/var/lib/roomkit \
    ROOMKIT_ON_SHUTDOWN=stop
VOLUME /var/lib/roomkit
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
  CMD ["/opt/roomkit/packaging/roomkit-exec", "--healthcheck"]

# tini reaps what the service's helpers leave behind and hands it signals one at a time.
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/roomkit/packaging/roomkit-exec"]
CMD ["serve"]
