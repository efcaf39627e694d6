# agent-auth-proxy container image.
# Mirrors .ci/run: the builder installs with `npm ci` (native modules compile here), type-checks
# and builds; the runtime stage carries only production dependencies and dist/.
# (No Docker engine runs in this project's CI; this file is kept step-for-step with .ci/run.)

ARG NODE_VERSION=22

FROM node:${NODE_VERSION}-bookworm-slim AS builder
WORKDIR /app
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=builder /app/node_modules ./node_modules
COPY --from=builder /app/dist ./dist
COPY package.json ./
COPY config ./config
COPY examples ./examples
RUN mkdir -p /app/data && chown node:node /app/data
USER node
EXPOSE 8080
# Asks /healthz at the address the proxy (PID 1) was started with, so it follows --port/--config.
# Liveness, not readiness: an orchestrator that replaces unhealthy containers must not restart
# them all during a database outage (they would meet it again and lose the activity they hold).
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "dist/cli.js", "health", "--pid", "1", "--live"]
ENTRYPOINT ["node", "dist/cli.js"]
# Listen on all interfaces inside the container. Listening on 0.0.0.0 needs --issuer, the URL
# agents reach: http://localhost:8080 suits `docker run -p 8080:8080`; set your own in production.
CMD ["serve", "--config", "config/proxy.yaml", "--host", "0.0.0.0", "--port", "8080", "--issuer", "http://localhost:8080"]
