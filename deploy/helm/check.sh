#!/usr/bin/env bash
# Lints the chart and renders it under the configurations the README describes: secrets made
# from values, an existing Secret with Temporal mTLS and an API key, and no setup job. A
# render without the required secrets must fail. Usage: deploy/helm/check.sh HELM
set -euo pipefail
helm=${1:-helm}
chart="$(dirname "$0")/wop"
trial=(--set secrets.apiKey=trial-key --set secrets.tokenSecret=0123456789abcdef0123456789abcdef --set secrets.streamSecret=0123456789abcdef)

"$helm" lint --strict "$chart" "${trial[@]}"
out=$("$helm" template wop "$chart" "${trial[@]}")
for kind in Secret Service Job; do
  grep -q "^kind: $kind$" <<<"$out" || { echo "no $kind rendered"; exit 1; }
done
[[ $(grep -c '^kind: Deployment$' <<<"$out") == 2 ]] || { echo "want the worker and API deployments"; exit 1; }
grep -q 'value: "http://$(POD_IP):7244"' <<<"$out" || { echo "workers do not advertise their pod's stream URL"; exit 1; }

out=$("$helm" template wop "$chart" --set secrets.existingSecret=wop-secrets --set temporal.tlsSecret=temporal-tls \
  --set temporal.apiKeySecret=temporal-cloud --set temporal.taskQueue=team-a --set setup.enabled=false)
grep -q '^kind: Secret$' <<<"$out" && { echo "an existing Secret must not be rendered"; exit 1; }
grep -q '^kind: Job$' <<<"$out" && { echo "setup.enabled=false renders no job"; exit 1; }
grep -q 'value: "team-a"' <<<"$out" || { echo "the task queue is not passed on"; exit 1; }
[[ $(grep -c 'secretName: temporal-tls' <<<"$out") == 2 ]] || { echo "mTLS secret not mounted in both deployments"; exit 1; }

out=$("$helm" template wop "$chart" "${trial[@]}" --set temporal.tlsSecret=temporal-tls --set payloadKeys.secret=wop-payload-keys)
[[ $(grep -c 'secretName: wop-payload-keys' <<<"$out") == 2 ]] || { echo "payload keys not mounted in both deployments"; exit 1; }
[[ $(grep -c 'value: /etc/wop-payload-keys/payload-keys.yaml' <<<"$out") == 2 ]] || { echo "WOP_PAYLOAD_KEYS_FILE not set in both deployments"; exit 1; }
[[ $(grep -c 'secretName: temporal-tls' <<<"$out") == 3 ]] || { echo "mTLS secret not mounted beside the payload keys"; exit 1; }

out=$("$helm" template wop "$chart" "${trial[@]}" --set worker.versioning.deploymentName=wop --set image.tag=1.4.0)
grep -A1 'name: WOP_DEPLOYMENT_NAME' <<<"$out" | grep -q 'value: "wop"' || { echo "the deployment name is not passed on"; exit 1; }
grep -A1 'name: WOP_BUILD_ID' <<<"$out" | grep -q 'value: "1.4.0"' || { echo "the build id is not the image tag"; exit 1; }
grep -A1 'name: WOP_SET_CURRENT_VERSION' <<<"$out" | grep -q 'value: "true"' || { echo "the build is not made current"; exit 1; }
grep -q 'WOP_DEPLOYMENT_NAME' <<<"$("$helm" template wop "$chart" "${trial[@]}")" && { echo "unversioned by default"; exit 1; }
grep -q -- '"--legacy-attributes=false"' <<<"$("$helm" template wop "$chart" "${trial[@]}" --set setup.legacyAttributes=false)" || { echo "setup.legacyAttributes is not passed on"; exit 1; }

if "$helm" template wop "$chart" >/dev/null 2>&1; then
  echo "a render without secrets must fail"; exit 1
fi
echo "chart ok"
