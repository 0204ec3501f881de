{{/* Names. */}}
{{- define "dualmap.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dualmap.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "dualmap.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "dualmap.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "dualmap.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dualmap.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: router
{{- end }}

{{- define "dualmap.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dualmap.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "dualmap.poolName" -}}
{{- default (include "dualmap.fullname" .) .Values.inferencePool.name }}
{{- end }}

{{/* The headless Service over the InferencePool's pods. */}}
{{- define "dualmap.poolService" -}}
{{- printf "%s-pool" (include "dualmap.poolName" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dualmap.redisService" -}}
{{- printf "%s-redis" (include "dualmap.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dualmap.redisSecret" -}}
{{- default (printf "%s-redis" (include "dualmap.fullname" .)) .Values.redis.existingSecret }}
{{- end }}

{{- define "dualmap.redisPasswordSet" -}}
{{- if or .Values.redis.password .Values.redis.existingSecret }}true{{ end }}
{{- end }}

{{/* The Secret with the admin token: yours, or the chart's generated one; "" for none. */}}
{{- define "dualmap.adminTokenSecret" -}}
{{- if .Values.adminToken.existingSecret }}{{ .Values.adminToken.existingSecret }}{{ else if .Values.adminToken.generate }}{{ printf "%s-admin-token" (include "dualmap.fullname" .) }}{{ end }}
{{- end }}

{{/* The Secret with the ext_proc certificate: yours, or the chart's from PEM values. */}}
{{- define "dualmap.tlsSecret" -}}
{{- if .Values.tls.existingSecret }}{{ .Values.tls.existingSecret }}{{ else if .Values.tls.cert }}{{ printf "%s-tls" (include "dualmap.fullname" .) }}{{ end }}
{{- end }}

{{/* The Secret with the Redis CA and client certificate. */}}
{{- define "dualmap.redisTLSSecret" -}}
{{- $t := .Values.redis.external.tls }}
{{- if $t.existingSecret }}{{ $t.existingSecret }}{{ else if $t.ca }}{{ printf "%s-redis-tls" (include "dualmap.fullname" .) }}{{ end }}
{{- end }}

{{- define "dualmap.redisEnabled" -}}
{{- if or .Values.redis.bundled.enabled .Values.redis.external.enabled }}true{{ end }}
{{- end }}

{{- define "dualmap.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Where the chart mounts files in the router container. */}}
{{- define "dualmap.paths" -}}
config: /etc/dualmap/config
tls: /etc/dualmap/tls
redisTLS: /etc/dualmap/redis-tls
admin: /etc/dualmap/admin
recordKeys: /etc/dualmap/record-keys
tokenizer: /etc/dualmap/tokenizer
{{- end }}

{{/*
The dualmap config file: what the chart derives from the values, with
.Values.config merged over it.
*/}}
{{- define "dualmap.config" -}}
{{- $paths := include "dualmap.paths" . | fromYaml }}
{{- $c := dict }}
{{- $_ := set $c "listen" (dict "grpc" (printf ":%v" .Values.ports.grpc) "admin" (printf ":%v" .Values.ports.admin)) }}
{{- $tls := dict "mode" .Values.tls.mode }}
{{- if eq .Values.tls.mode "files" }}
{{- $_ := set $tls "cert_file" (printf "%s/tls.crt" $paths.tls) }}
{{- $_ := set $tls "key_file" (printf "%s/tls.key" $paths.tls) }}
{{- end }}
{{- if .Values.tls.clientCA }}
{{- $_ := set $tls "client_ca_file" (printf "%s/ca.crt" $paths.tls) }}
{{- end }}
{{- $_ := set $c "grpc" (dict "tls" $tls "health" (dict "enabled" true "listen" (printf ":%v" .Values.ports.health))) }}
{{- if include "dualmap.adminTokenSecret" . }}
{{- $_ := set $c "admin" (dict "token_file" (printf "%s/token" $paths.admin)) }}
{{- end }}
{{- if eq .Values.mode "inferencePool" }}
{{- $pool := deepCopy .Values.inferencePool.pool }}
{{- $dns := dict "name" (printf "%s.%s.svc.cluster.local" (include "dualmap.poolService" .) .Release.Namespace) "port" (first .Values.inferencePool.targetPorts) "interval" .Values.inferencePool.discoveryInterval }}
{{- $_ := set $pool "dns" $dns }}
{{- $_ := set $c "pools" (list $pool) }}
{{- $_ := set $c "routing" (dict "mode" "original-dst" "header" "x-gateway-destination-endpoint" "debug_headers" false) }}
{{- else }}
{{- $_ := set $c "pools" .Values.standalone.pools }}
{{- end }}
{{- if include "dualmap.redisEnabled" . }}
{{- $r := dict "key_prefix" .Values.redis.keyPrefix }}
{{- if .Values.redis.bundled.enabled }}
{{- $_ := set $r "addrs" (list (printf "%s.%s.svc.cluster.local:6379" (include "dualmap.redisService" .) .Release.Namespace)) }}
{{- else }}
{{- $x := .Values.redis.external }}
{{- $_ := set $r "addrs" $x.addrs }}
{{- if $x.masterName }}{{ $_ := set $r "master_name" $x.masterName }}{{ end }}
{{- if $x.db }}{{ $_ := set $r "db" $x.db }}{{ end }}
{{- if $x.tls.enabled }}
{{- $_ := set $r "tls" true }}
{{- if $x.tls.serverName }}{{ $_ := set $r "tls_server_name" $x.tls.serverName }}{{ end }}
{{- if include "dualmap.redisTLSSecret" . }}
{{- $_ := set $r "tls_ca_file" (printf "%s/ca.crt" $paths.redisTLS) }}
{{- if $x.tls.clientCert }}
{{- $_ := set $r "tls_cert_file" (printf "%s/tls.crt" $paths.redisTLS) }}
{{- $_ := set $r "tls_key_file" (printf "%s/tls.key" $paths.redisTLS) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.redis.username }}{{ $_ := set $r "username" .Values.redis.username }}{{ end }}
{{- if include "dualmap.redisPasswordSet" . }}
{{- $_ := set $r "password_env" "DUALMAP_REDIS_PASSWORD" }}
{{- end }}
{{- if .Values.redis.recordKeys.existingSecret }}
{{- $_ := set $r "record_key_file" (printf "%s/keys" $paths.recordKeys) }}
{{- end }}
{{- $_ := set $c "state" (dict "backend" "redis" "redis" $r) }}
{{- else }}
{{- $_ := set $c "state" (dict "backend" "memory") }}
{{- end }}
{{- $t := dict }}
{{- with .Values.tracing }}
{{- if .endpoint }}{{ $_ := set $t "endpoint" .endpoint }}{{ end }}
{{- if .protocol }}{{ $_ := set $t "protocol" .protocol }}{{ end }}
{{- if .serviceName }}{{ $_ := set $t "service_name" .serviceName }}{{ end }}
{{- if .sampler }}{{ $_ := set $t "sampler" .sampler }}{{ end }}
{{- if .samplerArg }}{{ $_ := set $t "sampler_arg" (toString .samplerArg) }}{{ end }}
{{- if .headers }}{{ $_ := set $t "headers" .headers }}{{ end }}
{{- end }}
{{- if $t }}{{ $_ := set $c "tracing" $t }}{{ end }}
{{- $merged := mustMergeOverwrite $c (deepCopy .Values.config) }}
{{- toYaml $merged }}
{{- end }}
