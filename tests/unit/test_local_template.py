"""The local runtime reads SAM templates: tags, Globals, environment, and what it refuses."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from context_ledger.local.cfn import Resolver, UnresolvedError, load_yaml
from context_ledger.local.template import (
    HttpRoute,
    TemplateError,
    environment_of,
    read_template,
)

ROOT = Path(__file__).resolve().parents[2]

HEADER = """\
Transform: AWS::Serverless-2016-10-31
"""

API = """\
  HttpApi:
    Type: AWS::Serverless::HttpApi
    Properties:
      Auth:
        DefaultAuthorizer: Auth
        Authorizers:
          Auth:
            FunctionArn: !GetAtt AuthFunction.Arn
            AuthorizerPayloadFormatVersion: "2.0"
            EnableSimpleResponses: true
            Identity:
              Headers: [Authorization]
  AuthFunction:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: python3.12
      CodeUri: functions/auth/
      Handler: app.handler
"""

FUNCTION = """\
  OneFunction:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: python3.12
      CodeUri: functions/one/
      Handler: app.handler
"""


def write_template(tmp_path: Path, body: str, folders: tuple[str, ...] = ("one",)) -> Path:
    for folder in (*folders, "auth"):
        code = tmp_path / "functions" / folder
        code.mkdir(parents=True, exist_ok=True)
        (code / "app.py").write_text("def handler(event, context):\n    return event\n")
    path = tmp_path / "template.yaml"
    path.write_text(HEADER + textwrap.dedent(body))
    return path


def test_short_form_tags_load_as_their_long_forms(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            a: !Ref Param
            b: !GetAtt Queue.Arn
            c: !GetAtt [Queue, QueueUrl]
            d: !Sub "${AWS::Region}-x"
            e: !Sub ["${A}", {A: !Ref Param}]
            f: !If [Cond, !Join ["-", [x, y]], !Select [0, [p, q]]]
            g: !Not [!Equals [!Ref Param, ""]]
            h: !FindInMap [Map, Top, Second]
            i: !Condition Cond
            j: !Base64 text
            """
        )
    )

    assert load_yaml(path) == {
        "a": {"Ref": "Param"},
        "b": {"Fn::GetAtt": ["Queue", "Arn"]},
        "c": {"Fn::GetAtt": ["Queue", "QueueUrl"]},
        "d": {"Fn::Sub": "${AWS::Region}-x"},
        "e": {"Fn::Sub": ["${A}", {"A": {"Ref": "Param"}}]},
        "f": {
            "Fn::If": [
                "Cond",
                {"Fn::Join": ["-", ["x", "y"]]},
                {"Fn::Select": [0, ["p", "q"]]},
            ]
        },
        "g": {"Fn::Not": [{"Fn::Equals": [{"Ref": "Param"}, ""]}]},
        "h": {"Fn::FindInMap": ["Map", "Top", "Second"]},
        "i": {"Condition": "Cond"},
        "j": {"Fn::Base64": "text"},
    }


def test_resolver_evaluates_what_is_known_locally() -> None:
    resolver = Resolver(
        parameters={"Stage": "dev", "Name": "ledger"},
        conditions={"IsDev": {"Fn::Equals": [{"Ref": "Stage"}, "dev"]}},
        mappings={"Sizes": {"dev": {"Memory": 256}}},
        refs={"Queue": "http://q"},
        attributes={("Queue", "Arn"): "arn:q"},
    )

    assert resolver.resolve({"Fn::Sub": "${Name}-${Stage}-${Queue.Arn}"}) == "ledger-dev-arn:q"
    assert resolver.resolve({"Fn::If": ["IsDev", {"Ref": "Queue"}, "no"]}) == "http://q"
    assert resolver.resolve({"Fn::FindInMap": ["Sizes", {"Ref": "Stage"}, "Memory"]}) == 256
    assert resolver.resolve({"Fn::Join": [",", [{"Ref": "Name"}, "x"]]}) == "ledger,x"
    assert resolver.resolve({"Fn::Sub": ["${X}!", {"X": {"Ref": "Name"}}]}) == "ledger!"


@pytest.mark.parametrize(
    "value",
    [
        {"Ref": "AWS::Region"},
        {"Fn::Sub": "arn:aws:s3:::${AWS::AccountId}"},
        {"Fn::GetAtt": ["Database", "Endpoint.Address"]},
        {"Ref": "SomeSecret"},
        {"Fn::ImportValue": "shared-vpc"},
    ],
)
def test_values_only_aws_knows_are_unresolved(value: object) -> None:
    with pytest.raises(UnresolvedError):
        Resolver().resolve(value)


def test_globals_merge_under_the_function_which_wins(tmp_path: Path) -> None:
    path = write_template(
        tmp_path,
        """\
        Globals:
          Function:
            Runtime: python3.12
            Timeout: 29
            MemorySize: 512
            Layers: [!Ref SharedLayer]
            Environment:
              Variables:
                SHARED: global
                OVERRIDDEN: global
        Resources:
          SharedLayer:
            Type: AWS::Serverless::LayerVersion
            Properties:
              ContentUri: shared/
          ExtraLayer:
            Type: AWS::Serverless::LayerVersion
            Properties:
              ContentUri: extra/
          OneFunction:
            Type: AWS::Serverless::Function
            Properties:
              CodeUri: functions/one/
              Handler: app.handler
              Timeout: 5
              Layers: [!Ref ExtraLayer, "arn:aws:lambda:us-east-1:017000801446:layer:Powertools:1"]
              Environment:
                Variables:
                  OVERRIDDEN: function
                  OWN: mine
        """,
    )

    function = read_template(path).functions["OneFunction"]

    assert function.runtime == "python3.12"
    assert function.timeout == 5
    assert function.memory_mb == 512
    assert function.layer_dirs == (tmp_path / "shared", tmp_path / "extra")
    assert function.environment == {"SHARED": "global", "OVERRIDDEN": "function", "OWN": "mine"}


def test_environment_resolves_parameters_queues_and_conditions_and_drops_the_rest(
    tmp_path: Path,
) -> None:
    path = write_template(
        tmp_path,
        """\
        Parameters:
          LogLevel: {Type: String, Default: INFO}
          Retries: {Type: Number, Default: 3}
          JwksUrl: {Type: String}
          Existing: {Type: String, Default: ""}
        Conditions:
          CreateDatabase: !Equals [!Ref Existing, ""]
        Resources:
          Queue:
            Type: AWS::SQS::Queue
          Secret:
            Type: AWS::SecretsManager::Secret
          OneFunction:
            Type: AWS::Serverless::Function
            Properties:
              Runtime: python3.12
              CodeUri: functions/one/
              Handler: app.handler
              Environment:
                Variables:
                  PLAIN: text
                  NUMBER: 7
                  FLAG: true
                  LOG_LEVEL: !Ref LogLevel
                  RETRIES: !Ref Retries
                  QUEUE_URL: !Ref Queue
                  QUEUE_URL_ATTR: !GetAtt Queue.QueueUrl
                  QUEUE_ARN: !GetAtt Queue.Arn
                  MODE: !If [CreateDatabase, embedded, existing]
                  JWKS_URL: !Ref JwksUrl
                  SECRET_ARN: !If [CreateDatabase, !Ref Secret, !Ref Existing]
                  REGION: !Sub "${AWS::Region}"
        """,
    )
    template = read_template(path)
    resolver = Resolver(
        parameters=template.resolver.parameters,
        conditions=template.resolver.conditions,
        refs={"Queue": "http://127.0.0.1:1/123456789012/q"},
        attributes={
            ("Queue", "Arn"): "arn:aws:sqs:us-east-1:123456789012:q",
            ("Queue", "QueueUrl"): "http://127.0.0.1:1/123456789012/q",
        },
    )

    values, dropped = environment_of(template.functions["OneFunction"], resolver)

    assert values == {
        "PLAIN": "text",
        "NUMBER": "7",
        "FLAG": "true",
        "LOG_LEVEL": "INFO",
        "RETRIES": "3",
        "QUEUE_URL": "http://127.0.0.1:1/123456789012/q",
        "QUEUE_URL_ATTR": "http://127.0.0.1:1/123456789012/q",
        "QUEUE_ARN": "arn:aws:sqs:us-east-1:123456789012:q",
        "MODE": "embedded",
    }
    assert sorted(dropped) == ["JWKS_URL", "REGION", "SECRET_ARN"]


def test_routes_take_the_default_authorizer_unless_they_opt_out(tmp_path: Path) -> None:
    path = write_template(
        tmp_path,
        "Resources:\n"
        + API
        + FUNCTION
        + """\
      Events:
        Get:
          Type: HttpApi
          Properties: {ApiId: !Ref HttpApi, Method: get, Path: "/things/{thingId}"}
        Health:
          Type: HttpApi
          Properties:
            ApiId: !Ref HttpApi
            Method: GET
            Path: /health
            Auth: {Authorizer: NONE}
""",
    )

    template = read_template(path)

    assert template.functions["OneFunction"].routes == (
        HttpRoute("GET", "/things/{thingId}", "Auth"),
        HttpRoute("GET", "/health", None),
    )
    assert template.api is not None
    authorizer = template.api.authorizers["Auth"]
    assert (authorizer.function, authorizer.identity_headers) == (
        "AuthFunction",
        ("Authorization",),
    )


def test_queues_are_created_dead_letter_queue_first(tmp_path: Path) -> None:
    path = write_template(
        tmp_path,
        """\
        Resources:
          Work:
            Type: AWS::SQS::Queue
            Properties:
              VisibilityTimeout: 60
              RedrivePolicy: {deadLetterTargetArn: !GetAtt Dead.Arn, maxReceiveCount: 5}
          Dead:
            Type: AWS::SQS::Queue
            Properties: {QueueName: fixed-dead}
        """,
    )

    queues = read_template(path).queues_in_creation_order()

    assert [q.logical_id for q in queues] == ["Dead", "Work"]
    assert (queues[0].queue_name, queues[1].queue_name) == ("fixed-dead", None)
    assert (queues[1].dead_letter_queue, queues[1].max_receive_count) == ("Dead", 5)
    assert queues[1].attributes == {"VisibilityTimeout": "60"}


def test_function_is_found_by_logical_id_or_code_folder(tmp_path: Path) -> None:
    path = write_template(
        tmp_path,
        """\
        Resources:
          OneFunction:
            Type: AWS::Serverless::Function
            Properties: {Runtime: python3.12, CodeUri: functions/one/, Handler: app.handler}
        """,
    )
    template = read_template(path)

    assert template.function("one") is template.function("OneFunction")
    with pytest.raises(KeyError, match="OneFunction"):
        template.function("two")


def test_resources_whose_condition_is_false_are_left_out(tmp_path: Path) -> None:
    path = write_template(
        tmp_path,
        """\
        Parameters:
          Existing: {Type: String, Default: "arn:aws:secretsmanager:x"}
        Conditions:
          CreateQueue: !Equals [!Ref Existing, ""]
        Resources:
          Optional:
            Type: AWS::SQS::Queue
            Condition: CreateQueue
        """,
    )

    assert read_template(path).queues == {}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            FUNCTION.replace("python3.12", "nodejs20.x"),
            "runtime 'nodejs20.x' is not Python",
        ),
        (FUNCTION.replace("app.handler", "missing.handler"), "missing.py does not exist"),
        (
            FUNCTION
            + """\
      Events:
        Work:
          Type: SQS
          Properties: {Queue: "arn:aws:sqs:us-east-1:123456789012:elsewhere"}
""",
            "Queue must be !GetAtt <queue>.Arn",
        ),
        (
            FUNCTION
            + """\
      Events:
        Get:
          Type: HttpApi
          Properties: {ApiId: !Ref HttpApi, Path: /x, Method: GET, Auth: {Authorizer: Other}}
"""
            + API,
            "authorizer Other is not defined",
        ),
        (
            FUNCTION
            + """\
      Events:
        Get:
          Type: HttpApi
          Properties: {ApiId: !Ref HttpApi, Path: /x, Method: GET, PayloadFormatVersion: "1.0"}
"""
            + API,
            "only payload format 2.0",
        ),
        (
            FUNCTION
            + """\
      Events:
        Get:
          Type: HttpApi
          Properties: {ApiId: !Ref HttpApi, Path: /x, Method: GET}
"""
            + API.replace(
                "FunctionArn: !GetAtt AuthFunction.Arn",
                "JwtConfiguration: {issuer: https://idp}",
            ),
            "JWT authorizers are not emulated",
        ),
        (
            FUNCTION
            + """\
      Events:
        A:
          Type: HttpApi
          Properties: {ApiId: !Ref HttpApi, Path: /x, Method: GET}
        B:
          Type: HttpApi
          Properties: {ApiId: !Ref HttpApi, Path: /x, Method: GET}
"""
            + API,
            "route GET /x is declared by",
        ),
        (
            FUNCTION
            + """\
      Events:
        Get:
          Type: HttpApi
          Properties: {ApiId: !Ref HttpApi, Path: "/{proxy+}/more", Method: GET}
"""
            + API,
            "must be the last segment",
        ),
        (
            """\
  A:
    Type: AWS::SQS::Queue
    Properties: {RedrivePolicy: {deadLetterTargetArn: !GetAtt B.Arn, maxReceiveCount: 1}}
  B:
    Type: AWS::SQS::Queue
    Properties: {RedrivePolicy: {deadLetterTargetArn: !GetAtt A.Arn, maxReceiveCount: 1}}
""",
            "dead-letter queues form a cycle",
        ),
    ],
)
def test_templates_it_cannot_serve_are_refused_with_the_reason(
    tmp_path: Path, body: str, message: str
) -> None:
    path = write_template(tmp_path, "Resources:\n" + body)

    with pytest.raises(TemplateError, match=message):
        read_template(path)


def test_invalid_yaml_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("Resources: [unclosed\n")

    with pytest.raises(TemplateError, match=r"broken\.yaml is not valid YAML"):
        read_template(path)


def test_project_template_is_servable() -> None:
    template = read_template(ROOT / "template.yaml")

    spaces = template.function("spaces")
    assert {r.route_key for r in spaces.routes} >= {
        "POST /api/v1/context/spaces",
        "GET /api/v1/context/spaces",
        "GET /api/v1/context/spaces/{spaceId}",
        "PUT /api/v1/context/spaces/{spaceId}/grants",
    }
    assert all(r.authorizer for r in spaces.routes)
    assert template.api is not None
    authorizer = template.api.authorizers[template.api.default_authorizer or ""]
    assert template.functions[authorizer.function].folder == "authorizer"
    (source,) = template.function("attribution_writer").sqs_sources
    assert source.report_item_failures
    assert template.queues[source.queue].dead_letter_queue is not None
    assert template.function("chain_verify").schedules
    assert template.function("migrate").handler_file.is_file()
