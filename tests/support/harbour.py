"""A small memory and the questions it answers, for the tests of where retrieval's records
go in a request (SPEC §5 4a): each question shares its words with one fact."""

FACTS = [
    "The harbour ferry leaves at nine",
    "The lighthouse keeper is called Ada",
    "Tide tables are posted on the quay",
    "The fish market opens at dawn",
]
QUESTIONS = [
    "When does the ferry leave?",
    "Who keeps the lighthouse?",
    "Where are the tide tables posted?",
    "When does the fish market open?",
]
