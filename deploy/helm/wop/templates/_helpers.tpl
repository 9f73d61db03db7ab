{{- define "wop.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "wop.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "wop.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- define "wop.secretName" -}}
{{- if .Values.secrets.existingSecret -}}
{{ .Values.secrets.existingSecret }}
{{- else -}}
{{ include "wop.fullname" . }}
{{- end -}}
{{- end -}}

{{/* The Temporal client environment every process shares. */}}
{{- define "wop.temporalEnv" -}}
- name: TEMPORAL_ADDRESS
  value: {{ .Values.temporal.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
- name: WOP_TASK_QUEUE
  value: {{ .Values.temporal.taskQueue | quote }}
- name: WOP_PACKS
  value: {{ .Values.packsDir | quote }}
{{- if .Values.temporal.serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ .Values.temporal.serverName | quote }}
{{- end }}
{{- if .Values.temporal.tlsSecret }}
- name: TEMPORAL_TLS_CERT
  value: /etc/temporal-tls/tls.crt
- name: TEMPORAL_TLS_KEY
  value: /etc/temporal-tls/tls.key
{{- end }}
{{- if .Values.temporal.apiKeySecret }}
- name: TEMPORAL_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.temporal.apiKeySecret }}
      key: api-key
{{- end }}
{{- if .Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.otel.endpoint | quote }}
{{- end }}
{{- if .Values.otel.protocol }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ .Values.otel.protocol | quote }}
{{- end }}
{{- end -}}

{{/* Secrets by process: the API holds the keys and the token secret; both hold the webhook
key (the worker signs deliveries) and the stream secret (the worker serves streamed replies,
the API reads them). */}}
{{- define "wop.secretEnvAPI" -}}
{{- include "wop.secretRefs" (dict "root" . "names" (dict "WOP_API_KEY" "api-key" "WOP_TOKEN_SECRET" "token-secret" "WOP_WEBHOOK_SECRET" "webhook-secret" "WOP_STREAM_SECRET" "stream-secret")) }}
{{- end -}}

{{- define "wop.secretEnvWorker" -}}
{{- include "wop.secretRefs" (dict "root" . "names" (dict "WOP_WEBHOOK_SECRET" "webhook-secret" "WOP_STREAM_SECRET" "stream-secret")) }}
{{- end -}}

{{- define "wop.secretRefs" -}}
{{- $root := .root }}
{{- range $name, $key := .names }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "wop.secretName" $root }}
      key: {{ $key }}
      optional: {{ eq $key "webhook-secret" }}
{{- end }}
{{- end -}}

{{/* The sealed-payload keys file (WOP_PAYLOAD_KEYS_FILE), for the processes that write payloads. */}}
{{- define "wop.payloadEnv" -}}
{{- if .Values.payloadKeys.secret }}
- name: WOP_PAYLOAD_KEYS_FILE
  value: /etc/wop-payload-keys/{{ .Values.payloadKeys.key }}
{{- end }}
{{- end -}}

{{/* The mounts of a deployment's container: Temporal's mTLS files, the payload keys. */}}
{{- define "wop.volumeMounts" -}}
{{- if or .Values.temporal.tlsSecret .Values.payloadKeys.secret }}
volumeMounts:
{{- if .Values.temporal.tlsSecret }}
  - name: temporal-tls
    mountPath: /etc/temporal-tls
    readOnly: true
{{- end }}
{{- if .Values.payloadKeys.secret }}
  - name: payload-keys
    mountPath: /etc/wop-payload-keys
    readOnly: true
{{- end }}
{{- end }}
{{- end -}}

{{- define "wop.volumes" -}}
{{- if or .Values.temporal.tlsSecret .Values.payloadKeys.secret }}
volumes:
{{- if .Values.temporal.tlsSecret }}
  - name: temporal-tls
    secret:
      secretName: {{ .Values.temporal.tlsSecret }}
{{- end }}
{{- if .Values.payloadKeys.secret }}
  - name: payload-keys
    secret:
      secretName: {{ .Values.payloadKeys.secret }}
{{- end }}
{{- end }}
{{- end -}}
