"""The labelled set of bench/memory_quality.py: what a team would keep in long-term memory
about fifty services (who owns them, how they deploy, their runbooks, where their data
lives, some of it in French, German and Spanish, and notes that merely mention them), and
questions people ask about them.

Each query names the records that answer it. The questions are phrased the way people ask,
not the way the records are written: other word forms ("deploying" for "deploys"),
other words for the same thing ("responsible for" for "owned by"), identifiers
("RB-1012"), and other languages.
"""

from __future__ import annotations

SERVICES = [
    ("billing", "payments", "Ana"),
    ("invoices", "payments", "Ben"),
    ("checkout", "storefront", "Chloe"),
    ("search", "discovery", "Dev"),
    ("catalog", "discovery", "Eli"),
    ("inventory", "supply", "Fay"),
    ("shipping", "supply", "Gus"),
    ("notifications", "messaging", "Hana"),
    ("auth", "identity", "Ivo"),
    ("profiles", "identity", "Jun"),
    ("reviews", "community", "Kai"),
    ("recommendations", "discovery", "Lea"),
    ("analytics", "data", "Mo"),
    ("reporting", "data", "Nia"),
    ("gateway", "platform", "Oli"),
    ("pricing", "storefront", "Pia"),
    ("coupons", "storefront", "Quin"),
    ("loyalty", "community", "Rae"),
    ("livechat", "support", "Sol"),
    ("mailer", "messaging", "Tom"),
    ("sms", "messaging", "Uma"),
    ("scheduler", "platform", "Vic"),
    ("exports", "data", "Wes"),
    ("imports", "data", "Xia"),
    ("media", "content", "Yan"),
    ("thumbnails", "content", "Zoe"),
    ("auditlog", "security", "Abe"),
    ("flags", "platform", "Bea"),
    ("settings", "platform", "Cai"),
    ("metrics", "observability", "Dan"),
    ("logging", "observability", "Eve"),
    ("tracing", "observability", "Finn"),
    ("backups", "infra", "Gil"),
    ("ledger", "payments", "Hal"),
    ("tax", "payments", "Iris"),
    ("fraud", "security", "Jay"),
    ("kyc", "security", "Kim"),
    ("onboarding", "growth", "Lou"),
    ("translations", "content", "Max"),
    ("maps", "geo", "Ned"),
    ("geocoder", "geo", "Ola"),
    ("forecast", "geo", "Pat"),
    ("calendar", "bookings", "Ria"),
    ("booking", "bookings", "Sam"),
    ("refunds", "payments", "Tia"),
    ("subscriptions", "payments", "Udo"),
    ("webhooks", "platform", "Val"),
    ("ratelimiter", "platform", "Wim"),
    ("cdn", "infra", "Xen"),
    ("dns", "infra", "Yul"),
]
METHODS = ["blue-green", "canary", "rolling"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday"]
STORES = ["PostgreSQL", "Redis", "S3", "Cassandra", "SQLite"]
FR_DAYS = ["lundi", "mardi", "mercredi", "jeudi"]
DE_DAYS = ["Montag", "Dienstag", "Mittwoch", "Donnerstag"]
ES_DAYS = ["lunes", "martes", "miércoles", "jueves"]


def records() -> list[tuple[str, str]]:
    """(id, content): four facts per service (200), and two notes per service that only
    mention it (100 more), as a real memory holds more talk than answers."""
    out = []
    for i, (name, team, person) in enumerate(SERVICES):
        method, day, store = METHODS[i % 3], DAYS[i % 4], STORES[i % 5]
        out.append(
            (f"{name}-owner", f"The {name} service is owned by the {team} team; {person} leads it.")
        )
        out.append(
            (f"{name}-deploy", f"{name} deploys are {method} and ship every {day} afternoon.")
        )
        out.append(
            (f"{name}-runbook", f"Runbook RB-{1000 + i} covers {name} outages and paging rules.")
        )
        if i % 4 == 1:
            detail = (
                f"Le déploiement de {name} se fait le {FR_DAYS[i % 4]} ; l'équipe {team} "
                "surveille les erreurs."
            )
        elif i % 4 == 2:
            detail = (
                f"Die Bereitstellung von {name} erfolgt am {DE_DAYS[i % 4]}; das Team {team} "
                "beobachtet die Fehlerrate."
            )
        elif i % 4 == 3:
            detail = (
                f"El despliegue de {name} se hace el {ES_DAYS[i % 4]}; el equipo {team} "
                "vigila los errores."
            )
        else:
            detail = f"{name} keeps its data in {store}, with backups retained for {7 + i} days."
        out.append((f"{name}-detail", detail))
        other = SERVICES[(i + 7) % len(SERVICES)][0]
        out.append((f"{name}-note", f"Ticket about {name}: users asked for an export to CSV."))
        out.append((f"{name}-review", f"{other} and {name} came up in the weekly review."))
    return out


def queries() -> list[tuple[str, list[str], str]]:
    """(question, ids of the records that answer it, kind of phrasing): 64 in all."""
    return [
        # word forms
        ("who owns billing", ["billing-owner"], "word form"),
        ("Deploying checkout", ["checkout-deploy"], "word form"),
        ("DEPLOY search", ["search-deploy"], "word form"),
        ("how is the catalog deployed", ["catalog-deploy"], "word form"),
        ("shipping deployment", ["shipping-deploy"], "word form"),
        ("who is leading auth", ["auth-owner"], "word form"),
        ("which team owned profiles", ["profiles-owner"], "word form"),
        ("when do reviews ship", ["reviews-deploy"], "word form"),
        ("paging rule for gateway", ["gateway-runbook"], "word form"),
        ("outage of pricing", ["pricing-runbook"], "word form"),
        ("retaining backups of analytics", ["analytics-detail"], "word form"),
        ("coupons deploying day", ["coupons-deploy"], "word form"),
        ("who leads notifications", ["notifications-owner"], "word form"),
        ("mailer deploys", ["mailer-deploy"], "word form"),
        ("scheduler owner", ["scheduler-owner"], "word form"),
        ("loyalty shipped days", ["loyalty-deploy"], "word form"),
        # other words for the same thing
        ("which team is responsible for invoices", ["invoices-owner"], "synonym"),
        ("who maintains the inventory service", ["inventory-owner"], "synonym"),
        ("release process of recommendations", ["recommendations-deploy"], "synonym"),
        ("what happens when reporting is down, incident guide", ["reporting-runbook"], "synonym"),
        ("where does sms store information", ["sms-detail"], "synonym"),
        ("how long do we retain copies of media data", ["media-detail"], "synonym"),
        ("rollout strategy for media", ["media-deploy"], "synonym"),
        ("point of contact for thumbnails", ["thumbnails-owner"], "synonym"),
        ("emergency procedure auditlog", ["auditlog-runbook"], "synonym"),
        ("which database does settings use", ["settings-detail"], "synonym"),
        ("who runs ledger", ["ledger-owner"], "synonym"),
        ("tax release day", ["tax-deploy"], "synonym"),
        ("fraud on-call instructions", ["fraud-runbook"], "synonym"),
        ("kyc owners", ["kyc-owner"], "synonym"),
        # identifiers
        ("RB-1012", ["analytics-runbook"], "identifier"),
        ("rb-1033", ["ledger-runbook"], "identifier"),
        ("what is RB-1000 about", ["billing-runbook"], "identifier"),
        ("runbook 1047", ["ratelimiter-runbook"], "identifier"),
        ("RB-1021 paging", ["scheduler-runbook"], "identifier"),
        ("blue-green billing", ["billing-deploy"], "identifier"),
        ("PostgreSQL", ["billing-detail", "sms-detail", "geocoder-detail"], "identifier"),
        ("Cassandra backups", ["auth-detail", "settings-detail", "cdn-detail"], "identifier"),
        (
            "ratelimiter",
            [
                "ratelimiter-owner",
                "ratelimiter-deploy",
                "ratelimiter-runbook",
                "ratelimiter-detail",
            ],
            "identifier",
        ),
        ("geocoder RB-1040", ["geocoder-runbook"], "identifier"),
        ("cdn blue-green", ["cdn-deploy"], "identifier"),
        ("dns team", ["dns-owner"], "identifier"),
        # other languages, and accents
        ("déploiement de invoices", ["invoices-detail"], "other language"),
        ("deploiement loyalty", ["loyalty-detail"], "other language"),
        ("Bereitstellung von checkout", ["checkout-detail"], "other language"),
        ("despliegue de search", ["search-detail"], "other language"),
        ("quand se fait le déploiement de profiles", ["profiles-detail"], "other language"),
        ("Wann erfolgt die Bereitstellung von shipping", ["shipping-detail"], "other language"),
        ("el equipo de recommendations vigila", ["recommendations-detail"], "other language"),
        ("DÉPLOIEMENT reporting", ["reporting-detail"], "other language"),
        ("Fehlerrate exports", ["exports-detail"], "other language"),
        ("despliegue de flags", ["flags-detail"], "other language"),
        (
            "l'équipe payments surveille",
            ["invoices-detail", "ledger-detail", "subscriptions-detail"],
            "other language",
        ),
        ("Team observability Bereitstellung", ["logging-detail"], "other language"),
        # plain questions
        ("how do we deploy billing", ["billing-deploy"], "question"),
        ("who should I ask about search", ["search-owner"], "question"),
        (
            "what does the payments team own",
            [
                "billing-owner",
                "invoices-owner",
                "ledger-owner",
                "tax-owner",
                "refunds-owner",
                "subscriptions-owner",
            ],
            "question",
        ),
        ("where is the runbook for webhooks", ["webhooks-runbook"], "question"),
        ("when does booking ship", ["booking-deploy"], "question"),
        ("what is the deploy method for calendar", ["calendar-deploy"], "question"),
        ("who leads the geo team services maps", ["maps-owner"], "question"),
        ("translations owner", ["translations-owner"], "question"),
        ("onboarding outages", ["onboarding-runbook"], "question"),
        ("backups service data retention", ["backups-detail"], "question"),
    ]
