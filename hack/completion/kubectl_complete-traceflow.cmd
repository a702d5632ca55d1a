@echo off
REM kubectl runs kubectl_complete-PLUGIN to complete `kubectl PLUGIN ...`.
kubectl-traceflow.exe __complete %*
