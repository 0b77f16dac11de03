"""Messages of many kinds, for checking token estimates: prose, code, data, other languages."""

# ruff: noqa: RUF001 - the non-Latin letters and full-width punctuation are the point

from __future__ import annotations

TEXTS = [
    "Could you explain why the deployment failed last night? The logs say the health check "
    "timed out after thirty seconds, but the service itself started fine.",
    "def retry(fn, attempts=3):\n    for i in range(attempts):\n        try:\n"
    "            return fn()\n        except OSError as exc:\n            last = exc\n"
    "    raise last\n",
    "Pourquoi le déploiement a-t-il échoué hier soir ? Les journaux indiquent que la "
    "vérification de santé a expiré après trente secondes.",
    "Warum ist die Bereitstellung gestern Abend fehlgeschlagen? Die Protokolle zeigen eine "
    "Zeitüberschreitung der Zustandsprüfung nach dreißig Sekunden.",
    "Почему развертывание вчера вечером не удалось? В журналах написано, что проверка "
    "работоспособности истекла через тридцать секунд.",
    "昨晚的部署为什么失败了？日志显示健康检查在三十秒后超时，但服务本身启动正常。",
    "| region | p50 ms | p99 ms | errors |\n|---|---|---|---|\n| eu-west-1 | 41 | 388 | 0.02% |\n"
    "| us-east-2 | 37 | 1204 | 1.75% |\n| ap-south-1 | 96 | 2210 | 3.10% |",
    '{"service": "billing", "replicas": 3, "image": "registry.example.com/billing:2.14.7", '
    '"env": {"DB_POOL": "20", "TIMEOUT_MS": "30000"}}',
    "kubectl -n billing rollout status deploy/billing --timeout=120s && "
    "kubectl -n billing get pods -l app=billing -o wide | grep -v Running",
    "Summary of the incident:\n- 21:04 alerts fired for elevated 5xx\n- 21:11 rollback started\n"
    "- 21:19 error rate back under 0.1%\n- follow-up: raise the health check timeout to 60 s",
    "const total = orders.filter(o => o.status === 'paid').reduce((sum, o) => sum + o.amount, 0);\n"
    "console.log(`paid: ${total.toFixed(2)} EUR`);",
    "Ok, thanks. One more thing: what would you name a feature flag that turns the new "
    "checkout flow on for ten percent of the users in Germany and Austria?",
]
