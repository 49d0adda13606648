from contextwright import Budget, Engine


def test_assemble_returns_window_and_trace(engine: Engine) -> None:
    engine.add(
        project="p",
        author="alice",
        content="@bob can you check the auth flow?",
        to=["bob"],
        visibility="direct",
    )
    result = engine.assemble(
        project="p",
        agent="bob",
        task="check the auth flow",
        budget=Budget(model="gpt-4o", window=4000, reserve=500),
    )
    assert result.tokens <= result.available
    assert any("auth flow" in (m.get("content") or "") for m in result.messages)
    assert engine.trace(result.trace.project, result.trace.id).id == result.trace.id
