from logql.pipeline.builder import LabelsBuilder


def test_precedence_parsed_over_sm_over_stream():
    lb = LabelsBuilder({"app": "api", "env": "prod"})
    lb.reset({"trace_id": "t1", "app": "from-sm"})
    # SM colliding with a stream label is renamed
    assert lb.get("app") == "api"
    assert lb.get("app_extracted") == "from-sm"
    assert lb.get("trace_id") == "t1"
    lb.set("trace_id", "parsed")
    lb.set("env", "dev")
    assert lb.get("trace_id") == "parsed" and lb.get("env") == "dev"
    assert lb.categories() == (
        {"app": "api"},
        {"app_extracted": "from-sm"},
        {"trace_id": "parsed", "env": "dev"},
    )
    assert lb.labels() == {"app": "api", "app_extracted": "from-sm", "env": "dev", "trace_id": "parsed"}
    assert list(lb.labels()) == sorted(lb.labels())


def test_delete_and_missing():
    lb = LabelsBuilder({"app": "api", "env": "prod"})
    lb.reset([("sm1", "v")])
    lb.delete("env")
    lb.delete("sm1")
    assert lb.get("env") is None and lb.get("sm1") is None and not lb.has("env")
    assert lb.labels() == {"app": "api"}
    lb.set("env", "again")
    assert lb.labels() == {"app": "api", "env": "again"}
    assert lb.categories()[2] == {"env": "again"}


def test_error_state_first_error_wins_and_reset():
    lb = LabelsBuilder({"app": "api"})
    lb.set_error("JSONParserErr", "details1")
    lb.set_error("LabelFilterErr", "details2")
    assert lb.get("__error__") == "JSONParserErr"
    assert lb.get("__error_details__") == "details1"
    assert lb.labels() == {"__error__": "JSONParserErr", "__error_details__": "details1", "app": "api"}
    lb.delete("__error__")
    assert lb.get("__error__") is None
    lb.reset()
    assert lb.labels() == {"app": "api"}
    assert lb.error is None and lb.error_details is None and not lb.extracted and not lb.parsed


def test_error_labels_from_structured_metadata():
    lb = LabelsBuilder({"app": "api"})
    lb.reset({"__error__": "X", "__error_details__": "d", "k": "v"})
    assert lb.error == "X" and lb.error_details == "d"
    assert lb.structured_metadata() == {"k": "v"}
    assert lb.parsed_labels() == {"__error__": "X", "__error_details__": "d"}


def test_untouched_entry_shares_stream_dict():
    stream = {"a": "1"}
    lb = LabelsBuilder(stream)
    lb.reset()
    assert lb.labels() is stream


def test_reset_clears_previous_entry_state():
    lb = LabelsBuilder({"a": "1"})
    lb.reset({"s": "x"})
    lb.set_extracted("p", "v")
    lb.delete("a")
    lb.reset()
    assert lb.labels() == {"a": "1"}
    assert lb.template_data() == {"a": "1"}
