# infergauge in a container: the image the manifests of `infergauge k8s job` run
# (docs/kubernetes.md).
#   docker build -t registry.example.com/infergauge:0.1.0 .
#   docker push registry.example.com/infergauge:0.1.0

# Build: TypeScript needs the dev dependencies, the runtime image does not.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package*.json ./
RUN npm ci
COPY tsconfig.json ./
COPY src ./src
RUN npm run build

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package*.json ./
RUN npm ci --omit=dev && npm cache clean --force
COPY --from=build /app/dist ./dist
# Relative paths (--plan plan.yaml, the default infergauge-results/) resolve in a directory
# the node user may write, e.g. with docker run -v "$PWD:/work".
RUN mkdir /work && chown node:node /work
WORKDIR /work
# uid 1000: the manifests' securityContext runs the pods as this user too.
USER node
ENTRYPOINT ["node", "/app/dist/cli/main.js"]
CMD ["--help"]
