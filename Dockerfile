# syntax=docker/dockerfile:1
# Node 24 LTS for both stages (engines in package.json: 20.19+, 22.12+ and later lines).
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY workers ./workers
RUN npm run build

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force
COPY --from=build /app/dist ./dist
USER node
EXPOSE 3000
# A young generation of fixed size (V8 otherwise shrinks and regrows it by up to 32 MB of RSS at a time):
# docs/operations.md. node itself receives SIGTERM (exec form, no npm or shell in between) and drains before exiting.
# Run under an init for signal forwarding and zombie reaping: `docker run --init`, or `init: true` in compose.
# The worker image is the same with `node <the same flags> --import ./dist/src/telemetry/preload.js dist/workers/main.js`
# as its command. The preload starts OpenTelemetry only when OTEL_EXPORTER_OTLP_ENDPOINT is set.
CMD ["node", "--min-semi-space-size=16", "--max-semi-space-size=16", "--import", "./dist/src/telemetry/preload.js", "dist/src/server.js"]
