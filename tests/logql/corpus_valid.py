"""Valid LogQL queries and their canonical single-line form (spec logql.md §9.1).

Each entry is ``(query, canonical)``. The canonical text determines the tree (every binary node
is parenthesised), so checking it checks the AST shape; ``test_ast_shapes.py`` spells out
trees for a representative subset. Entries are partly written out by hand and partly expanded
from templates whose expected text is built independently of the printer.
"""

S = '{a="b"}'
R = 'rate({a="b"}[5m])'
R2 = 'rate({c="d"}[1m])'

HAND = [
    # ---- selectors
    ('{app="api"}', '{app="api"}'),
    ('{app="api", env!="dev"}', '{app="api", env!="dev"}'),
    ('{app=~"api|web"}', '{app=~"api|web"}'),
    ('{app=~".+", env="prod"}', '{app=~".+", env="prod"}'),
    ('{job=~`mysql-\\d+`}', '{job=~"mysql-\\\\d+"}'),
    ('{ app = "a" ,b!~"c" }', '{app="a", b!~"c"}'),
    ('{label_replace="x"}', '{label_replace="x"}'),
    ('{rate="x"}', '{rate="x"}'),
    ('{ip="1.2.3.4"}', '{ip="1.2.3.4"}'),
    ('{bytes="1", duration="2"}', '{bytes="1", duration="2"}'),
    ('{Sum="x", vector="y"}', '{Sum="x", vector="y"}'),
    ('{a="\\u00e9\\n\\t"}', '{a="é\\n\\t"}'),
    ('{a="b\\x41\\101"}', '{a="bAA"}'),
    ('{__name__="x"}', '{__name__="x"}'),
    ('{héllo="x"}', '{héllo="x"}'),
    ('{a="\\a\\b\\f\\v\\\\\\""}', '{a="\\a\\b\\f\\v\\\\\\""}'),
    ('{a="\\U0001F600"}', '{a="😀"}'),
    ('{a="x", a="y"}', '{a="x", a="y"}'),
    ('{a=""  , b="c"}', '{a="", b="c"}'),
    ('{a!~"", b=~"x|"  , c="d"}', '{a!~"", b=~"x|", c="d"}'),
    ('{a=~"(?i)foo.*bar"}', '{a=~"(?i)foo.*bar"}'),
    ('({a="b"})', '{a="b"}'),
    ('((({a="b"})))', '{a="b"}'),
    ('\n\t{a="b"}\r\n', '{a="b"}'),
    ('{a="b"} # trailing comment', '{a="b"}'),
    ('{a="#"} |= "#" # comment', '{a="#"} |= "#"'),
    ('{app="api"} # comment\n| json', '{app="api"} | json'),
    ('{a=\n"b"\n}', '{a="b"}'),
    ('{a=`multi\nline`}', '{a="multi\\nline"}'),
    # ---- line filters
    ('{app="api"} |= "error"', '{app="api"} |= "error"'),
    ('{app="api"} |= "error" != "timeout"', '{app="api"} |= "error" != "timeout"'),
    ('{app="api"} |~ "(?i)error"', '{app="api"} |~ "(?i)error"'),
    ('{app="api"} |= "GET" or "POST"', '{app="api"} |= "GET" or "POST"'),
    ('{app="api"} != "debug" or "trace"', '{app="api"} != "debug" != "trace"'),
    ('{app="api"} |> "<_> level=error <_>"', '{app="api"} |> "<_> level=error <_>"'),
    ('{app="api"} !> "<_> healthcheck <_>"', '{app="api"} !> "<_> healthcheck <_>"'),
    ('{app="web"} |= ip("10.0.0.0/8")', '{app="web"} |= ip("10.0.0.0/8")'),
    ('{app="web"} != ip("192.168.1.1-192.168.1.50")',
     '{app="web"} != ip("192.168.1.1-192.168.1.50")'),
    ('{a="b"} |= "a" or "b" or ip("10.0.0.0/8")', '{a="b"} |= "a" or "b" or ip("10.0.0.0/8")'),
    ('{a="b"} |= "x" != "y" |~ "z" !~ "w" |> "<_> foo" !> "bar <_>"',
     '{a="b"} |= "x" != "y" |~ "z" !~ "w" |> "<_> foo" !> "bar <_>"'),
    ('{a="b"} !~ "a" or "b" or "c"', '{a="b"} !~ "a" !~ "b" !~ "c"'),
    ('{a="b"} !> "a <_>" or "<_> b"', '{a="b"} !> "a <_>" !> "<_> b"'),
    ('{a="b"} |~ "a" or `b\\d`', '{a="b"} |~ "a" or "b\\\\d"'),
    ('{a="b"}|="x"|~"y"', '{a="b"} |= "x" |~ "y"'),
    ('{a="b"} |= ""', '{a="b"} |= ""'),
    ('{a="b"} |> ""', '{a="b"} |> ""'),
    ('{a="b"} |= "\\\\w+"', '{a="b"} |= "\\\\w+"'),
    ('{a="b"} |= `\\w+`', '{a="b"} |= "\\\\w+"'),
    ('{a="b"} |= "tab\\there"', '{a="b"} |= "tab\\there"'),
    ('{a="b"} |= "\\x00"', '{a="b"} |= "\\x00"'),
    ('{a="b"} |= "\\u00a0"', '{a="b"} |= "\\u00a0"'),
    ('{a="b"} != ip("::1") or ip("10.0.0.1")', '{a="b"} != ip("::1") != ip("10.0.0.1")'),
    # ---- parsers
    ('{app="api"} | json', '{app="api"} | json'),
    ('{app="api"} | json | __error__=""', '{app="api"} | json | __error__=""'),
    ('{app="api"} | json | __error__!=""', '{app="api"} | json | __error__!=""'),
    ('{app="api"} | json status="response.status", ua="request.headers[\\"User-Agent\\"]"',
     '{app="api"} | json status="response.status",ua="request.headers[\\"User-Agent\\"]"'),
    ('{app="api"} | json servers', '{app="api"} | json servers="servers"'),
    ('{a="b"} | json a="x.y", b="z[0]"', '{a="b"} | json a="x.y",b="z[0]"'),
    ('{a="b"} | json first, second="s"', '{a="b"} | json first="first",second="s"'),
    ('{app="api"} | logfmt | level="error"', '{app="api"} | logfmt | level="error"'),
    ('{app="api"} | logfmt --strict', '{app="api"} | logfmt --strict'),
    ('{app="api"} | logfmt --keep-empty', '{app="api"} | logfmt --keep-empty'),
    ('{app="api"} | logfmt --keep-empty --strict', '{app="api"} | logfmt --strict --keep-empty'),
    ('{app="api"} | logfmt --keep-empty host, ip="fwd"',
     '{app="api"} | logfmt --keep-empty host="host",ip="fwd"'),
    ('{a="b"} | logfmt --strict --keep-empty a, b="c"',
     '{a="b"} | logfmt --strict --keep-empty a="a",b="c"'),
    ('{a="b"} | logfmt x="y"', '{a="b"} | logfmt x="y"'),
    ('{a="b"} | LOGFMT | JSON', '{a="b"} | logfmt | json'),
    ('{app="api"} | regexp "(?P<method>\\\\w+) (?P<path>\\\\S+)"',
     '{app="api"} | regexp "(?P<method>\\\\w+) (?P<path>\\\\S+)"'),
    ('{a="b"} | regexp `(?P<x>\\d+)`', '{a="b"} | regexp "(?P<x>\\\\d+)"'),
    ('{a="b"} | regexp "(?<x>a)(b)"', '{a="b"} | regexp "(?<x>a)(b)"'),
    ('{app="nginx"} | pattern "<ip> - - [<_>] \\"<method> <uri> <_>\\" <status> <size>"',
     '{app="nginx"} | pattern "<ip> - - [<_>] \\"<method> <uri> <_>\\" <status> <size>"'),
    ('{a="b"} | pattern "<_> <x>"', '{a="b"} | pattern "<_> <x>"'),
    ('{a="b"} | pattern "<x>"', '{a="b"} | pattern "<x>"'),
    ('{app="api"} | unpack', '{app="api"} | unpack'),
    ('{app="api"} | unpack | json', '{app="api"} | unpack | json'),
    # ---- formatting stages
    ('{app="api"} | logfmt | line_format "{{.method}} {{.path}} {{.status}}"',
     '{app="api"} | logfmt | line_format "{{.method}} {{.path}} {{.status}}"'),
    ('{app="api"} | json | line_format "{{ __line__ | lower }}"',
     '{app="api"} | json | line_format "{{ __line__ | lower }}"'),
    ('{a="b"} | line_format `{{.x}}\n`', '{a="b"} | line_format "{{.x}}\\n"'),
    ('{app="api"} | logfmt | label_format svc=app, msg="{{.level}}: {{.msg}}"',
     '{app="api"} | logfmt | label_format svc=app,msg="{{.level}}: {{.msg}}"'),
    ('{a="b"} | label_format a=b', '{a="b"} | label_format a=b'),
    ('{a="b"} | label_format a="b"', '{a="b"} | label_format a="b"'),
    ('{a="b"} | label_format a=b | label_format a=c', '{a="b"} | label_format a=b | label_format a=c'),
    ('{app="api"} | logfmt | drop ts, caller', '{app="api"} | logfmt | drop ts,caller'),
    ('{a="b"} | drop a, b="c"', '{a="b"} | drop a,b="c"'),
    ('{a="b"} | drop __error__, __error_details__', '{a="b"} | drop __error__,__error_details__'),
    ('{a="b"} | drop x!="1", y=~"a.*", z!~"q"', '{a="b"} | drop x!="1",y=~"a.*",z!~"q"'),
    ('{app="api"} | json | keep level, method=~"GET|POST"',
     '{app="api"} | json | keep level,method=~"GET|POST"'),
    ('{a="b"} | keep a', '{a="b"} | keep a'),
    ('{app="api"} | decolorize', '{app="api"} | decolorize'),
    ('{a="b"} | decolorize |= "x" | decolorize', '{a="b"} | decolorize |= "x" | decolorize'),
    # ---- label filters
    ('{app="api"} | logfmt | addr = ip("10.0.0.0/8")', '{app="api"} | logfmt | addr=ip("10.0.0.0/8")'),
    ('{a="b"} | addr != ip("::1")', '{a="b"} | addr!=ip("::1")'),
    ('{app="api"} | logfmt | duration > 10s and status >= 500',
     '{app="api"} | logfmt | ( duration>10s , status>=500 )'),
    ('{app="api"} | logfmt | size > 20MB or (code="E1" , retry > 3)',
     '{app="api"} | logfmt | ( size>20MB or ( code="E1" , retry>3 ) )'),
    ('{a="b"} | x > 5 and y="z" or (w < 1s, v >= 2KB)',
     '{a="b"} | ( ( x>5 , y="z" ) or ( w<1s , v>=2.0kB ) )'),
    ('{a="b"} | A="1" or B="2" and C="3"', '{a="b"} | ( A="1" or ( B="2" , C="3" ) )'),
    ('{a="b"} | A="1" and B="2" or C="3"', '{a="b"} | ( ( A="1" , B="2" ) or C="3" )'),
    ('{a="b"} | A="1" or B="2" , C="3"', '{a="b"} | ( A="1" or ( B="2" , C="3" ) )'),
    ('{a="b"} | A="1" , B="2" or C="3"', '{a="b"} | ( A="1" , ( B="2" or C="3" ) )'),
    ('{a="b"} | A="1" B="2" , C="3" or D="4"',
     '{a="b"} | ( A="1" , ( B="2" , ( C="3" or D="4" ) ) )'),
    ('{a="b"} | (A="1" or B="2") and C="3"', '{a="b"} | ( ( A="1" or B="2" ) , C="3" )'),
    ('{a="b"} | A="1" (B="2" or C="3")', '{a="b"} | ( A="1" , ( B="2" or C="3" ) )'),
    ('{a="b"} | A="1" and B="2" and C="3"', '{a="b"} | ( ( A="1" , B="2" ) , C="3" )'),
    ('{a="b"} | A="1" or B="2" or C="3"', '{a="b"} | ( ( A="1" or B="2" ) or C="3" )'),
    ('{a="b"} | ((A="1"))', '{a="b"} | A="1"'),
    ('{a="b"} | A="1" | B="2"', '{a="b"} | A="1" | B="2"'),
    ('{a="b"} | x="1" AND y="2" OR z="3"', '{a="b"} | ( ( x="1" , y="2" ) or z="3" )'),
    ('{a="b"} | rate="x"', '{a="b"} | rate="x"'),
    ('{a="b"} | bytes > 1KB', '{a="b"} | bytes>1.0kB'),
    ('{a="b"} | ip="1.2.3.4"', '{a="b"} | ip="1.2.3.4"'),
    ('{a="b"} | label_replace="x"', '{a="b"} | label_replace="x"'),
    ('{a="b"} | count = 5', '{a="b"} | count==5'),
    # Go parses a|b as the class [a-b]: not literal matching, so Loki prints backquotes
    ('{a="b"} | x =~ "a|b" | y !~ "c"', '{a="b"} | x=~`a|b` | y!~"c"'),
    ('{a="b"} | x =~ "GET|POST" | y =~ "\\\\d+"', '{a="b"} | x=~"GET|POST" | y=~`\\d+`'),
    ('{a="b"} | x > 1 or y < 2 | z="w"', '{a="b"} | ( x>1 or y<2 ) | z="w"'),
    # ---- everything together
    ('{a="b"} |= "x" | json | logfmt | regexp "(?P<a>.)" | pattern "<b> <_>" | unpack '
     '| line_format "{{.a}}" | label_format c=a | drop d | keep e | decolorize | f="g"',
     '{a="b"} |= "x" | json | logfmt | regexp "(?P<a>.)" | pattern "<b> <_>" | unpack '
     '| line_format "{{.a}}" | label_format c=a | drop d | keep e | decolorize | f="g"'),
    # ---- range aggregations and log ranges
    ('count_over_time({app="api"}[5m])', 'count_over_time({app="api"}[5m])'),
    ('rate({app="api"} |= "error" [1m])', 'rate({app="api"} |= "error"[1m])'),
    ('sum by (level) (count_over_time({app="api"} | logfmt [5m]))',
     'sum by (level)(count_over_time({app="api"} | logfmt[5m]))'),
    ('bytes_rate({app="api"}[5m])', 'bytes_rate({app="api"}[5m])'),
    ('sum(bytes_over_time({app="api"}[1h]))', 'sum(bytes_over_time({app="api"}[1h]))'),
    ('sum_over_time({app="api"} | logfmt | unwrap bytes_sent [5m])',
     'sum_over_time({app="api"} | logfmt | unwrap bytes_sent[5m])'),
    ('quantile_over_time(0.99, {app="api"} | json | unwrap duration(latency) | __error__="" [5m]) by (path)',
     'quantile_over_time(0.99,{app="api"} | json | unwrap duration(latency) | __error__=""[5m]) by (path)'),
    ('avg_over_time({app="api"} | logfmt | unwrap bytes(size) [10m]) by (host)',
     'avg_over_time({app="api"} | logfmt | unwrap bytes(size)[10m]) by (host)'),
    ('max_over_time({app="api"} | json | unwrap latency [1m]) without (pod)',
     'max_over_time({app="api"} | json | unwrap latency[1m]) without (pod)'),
    ('rate_counter({app="exp"} | logfmt | unwrap total [5m])',
     'rate_counter({app="exp"} | logfmt | unwrap total[5m])'),
    ('last_over_time({app="api"} | logfmt | unwrap temp [5m])',
     'last_over_time({app="api"} | logfmt | unwrap temp[5m])'),
    ('absent_over_time({app="api", env="prod"}[15m])', 'absent_over_time({app="api", env="prod"}[15m])'),
    ('count_over_time({app="api"}[5m] offset 1h)', 'count_over_time({app="api"}[5m] offset 1h0m0s)'),
    ('count_over_time({a="b"}[5m] offset -1h)', 'count_over_time({a="b"}[5m] offset -1h0m0s)'),
    ('count_over_time({a="b"}[5m] offset 90s)', 'count_over_time({a="b"}[5m] offset 1m30s)'),
    ('count_over_time({a="b"}[5m] offset 1.5s)', 'count_over_time({a="b"}[5m] offset 1.5s)'),
    ('count_over_time({a="b"}[5m] offset 250ms)', 'count_over_time({a="b"}[5m] offset 250ms)'),
    ('count_over_time({a="b"}[5m] offset 2d)', 'count_over_time({a="b"}[5m] offset 48h0m0s)'),
    ('count_over_time({a="b"}[5m] offset 0s)', 'count_over_time({a="b"}[5m])'),
    ('rate({a="b"}[5m] |= "x")', 'rate({a="b"} |= "x"[5m])'),
    ('rate(({a="b"} |= "x")[5m])', 'rate({a="b"} |= "x"[5m])'),
    ('rate(({a="b"})[5m])', 'rate({a="b"}[5m])'),
    ('rate(({a="b"}[5m]))', 'rate({a="b"}[5m])'),
    ('rate((({a="b"}[5m])))', 'rate({a="b"}[5m])'),
    ('rate(({a="b"} |= "x" [5m]))', 'rate({a="b"} |= "x"[5m])'),
    ('rate({a="b"}[5m] offset 1m |= "x")', 'rate({a="b"} |= "x"[5m] offset 1m0s)'),
    ('sum_over_time({a="b"}[5m] | unwrap x)', 'sum_over_time({a="b"} | unwrap x[5m])'),
    ('sum_over_time({a="b"}[5m] offset 1m | unwrap x)', 'sum_over_time({a="b"} | unwrap x[5m] offset 1m0s)'),
    ('sum_over_time({a="b"}[5m] |= "x" | unwrap x)', 'sum_over_time({a="b"} |= "x" | unwrap x[5m])'),
    ('sum_over_time({a="b"}[5m] offset 1m | json | unwrap x)',
     'sum_over_time({a="b"} | json | unwrap x[5m] offset 1m0s)'),
    ('sum_over_time(({a="b"})[5m] | unwrap x)', 'sum_over_time({a="b"} | unwrap x[5m])'),
    ('sum_over_time(({a="b"})[5m] offset 5m | unwrap x)', 'sum_over_time({a="b"} | unwrap x[5m] offset 5m0s)'),
    ('sum_over_time(({a="b"} | unwrap x)[5m])', 'sum_over_time({a="b"} | unwrap x[5m])'),
    ('sum_over_time(({a="b"} | unwrap x)[5m] offset 1h)', 'sum_over_time({a="b"} | unwrap x[5m] offset 1h0m0s)'),
    ('sum_over_time(({a="b"} | json | unwrap x)[5m])', 'sum_over_time({a="b"} | json | unwrap x[5m])'),
    ('sum_over_time({a="b"} | unwrap x [5m] offset 1m)', 'sum_over_time({a="b"} | unwrap x[5m] offset 1m0s)'),
    ('sum_over_time({a="b"} | unwrap duration_seconds(x) [5m])',
     'sum_over_time({a="b"} | unwrap duration_seconds(x)[5m])'),
    ('sum_over_time({a="b"} | unwrap x | y > 1 and z="w" | __error__="" [5m])',
     'sum_over_time({a="b"} | unwrap x | ( y>1 , z="w" ) | __error__=""[5m])'),
    ('sum_over_time({a="b"} | unwrap BYTES(x) [5m])', 'sum_over_time({a="b"} | unwrap bytes(x)[5m])'),
    ('rate({a="b"} | unwrap x [5m])', 'rate({a="b"} | unwrap x[5m])'),
    ('absent_over_time({a="b"} | unwrap x [5m])', 'absent_over_time({a="b"} | unwrap x[5m])'),
    ('count_over_time({a="b"}[1h30m])', 'count_over_time({a="b"}[1h30m])'),
    ('count_over_time({a="b"}[90s])', 'count_over_time({a="b"}[1m30s])'),
    ('count_over_time({a="b"}[1d])', 'count_over_time({a="b"}[1d])'),
    ('count_over_time({a="b"}[2w])', 'count_over_time({a="b"}[2w])'),
    ('count_over_time({a="b"}[14d])', 'count_over_time({a="b"}[2w])'),
    ('count_over_time({a="b"}[1y])', 'count_over_time({a="b"}[1y])'),
    ('count_over_time({a="b"}[500ms])', 'count_over_time({a="b"}[500ms])'),
    ('count_over_time({a="b"}[0])', 'count_over_time({a="b"}[0s])'),
    ('count_over_time({a="b"}[1h0m])', 'count_over_time({a="b"}[1h])'),
    ('COUNT_OVER_TIME({a="b"}[1m])', 'count_over_time({a="b"}[1m])'),
    ('count_over_time ({a="b"}[1m])', 'count_over_time({a="b"}[1m])'),
    ('avg_over_time({a="b"} | unwrap x [5m]) by ()', 'avg_over_time({a="b"} | unwrap x[5m]) by ()'),
    ('avg_over_time({a="b"} | unwrap x [5m]) without ()', 'avg_over_time({a="b"} | unwrap x[5m]) without ()'),
    ('quantile_over_time(.5, {a="b"} | unwrap x [5m])', 'quantile_over_time(0.5,{a="b"} | unwrap x[5m])'),
    ('quantile_over_time(1, {a="b"} | unwrap x [5m])', 'quantile_over_time(1,{a="b"} | unwrap x[5m])'),
    ('quantile_over_time(1e-1, {a="b"} | unwrap x [5m])', 'quantile_over_time(0.1,{a="b"} | unwrap x[5m])'),
    # ---- vector aggregations
    ('topk(5, sum by (path) (rate({app="api"} | json [5m])))',
     'topk(5,sum by (path)(rate({app="api"} | json[5m])))'),
    ('bottomk by (env) (1, sum by (env, host) (rate({app="api"}[5m])))',
     'bottomk by (env)(1,sum by (env,host)(rate({app="api"}[5m])))'),
    ('sort_desc(sum by (host) (rate({app="api"}[5m])))', 'sort_desc(sum by (host)(rate({app="api"}[5m])))'),
    ('sum(rate({a="b"}[5m])) by (a)', 'sum by (a)(rate({a="b"}[5m]))'),
    ('sum by () (rate({a="b"}[5m]))', 'sum(rate({a="b"}[5m]))'),
    ('sum without () (rate({a="b"}[5m]))', 'sum without ()(rate({a="b"}[5m]))'),
    ('sum(rate({a="b"}[5m])) without (a, b)', 'sum without (a,b)(rate({a="b"}[5m]))'),
    ('sum by (count, rate, bytes) (rate({a="b"}[5m]))', 'sum by (count,rate,bytes)(rate({a="b"}[5m]))'),
    ('topk(05, rate({a="b"}[5m]))', 'topk(5,rate({a="b"}[5m]))'),
    ('approx_topk(3, rate({a="b"}[5m]))', 'approx_topk(3,rate({a="b"}[5m]))'),
    ('topk(5, rate({a="b"}[5m])) by (x)', 'topk by (x)(5,rate({a="b"}[5m]))'),
    ('sum(1)', 'sum(1)'),
    ('sum(vector(1))', 'sum(vector(1.000000))'),
    ('sum(sum(rate({a="b"}[5m])))', 'sum(sum(rate({a="b"}[5m])))'),
    ('sum((rate({a="b"}[5m])))', 'sum(rate({a="b"}[5m]))'),
    ('SUM by (a) (rate({a="b"}[5m]))', 'sum by (a)(rate({a="b"}[5m]))'),
    ('sum\nby\n(a)\n(rate({a="b"}[5m]))', 'sum by (a)(rate({a="b"}[5m]))'),
    ('sort(rate({a="b"}[5m])) by ()', 'sort(rate({a="b"}[5m]))'),
    ('count(rate({a="b"}[5m]) > 1)', 'count((rate({a="b"}[5m]) > 1))'),
    # ---- binary operators
    ('sum by (host) (rate({app="api"} |= "error" [5m])) / sum by (host) (rate({app="api"}[5m]))',
     '(sum by (host)(rate({app="api"} |= "error"[5m])) / sum by (host)(rate({app="api"}[5m])))'),
    ('sum(rate({app="api"}[1m])) * 60', '(sum(rate({app="api"}[1m])) * 60)'),
    ('count_over_time({app="api"}[1m]) > 100', '(count_over_time({app="api"}[1m]) > 100)'),
    ('count_over_time({app="api"}[1m]) > bool 100', '(count_over_time({app="api"}[1m]) > bool 100)'),
    ('sum by (app, status) (rate({job="http"} | json [5m])) / on (app) group_left sum by (app) (rate({job="http"} | json [5m]))',
     '(sum by (app,status)(rate({job="http"} | json[5m])) / on (app) group_left sum by (app)(rate({job="http"} | json[5m])))'),
    ('sum(count_over_time({app="api"}[5m])) or vector(0)',
     '(sum(count_over_time({app="api"}[5m])) or vector(0.000000))'),
    ('rate({app=~"a|b"}[1m]) and rate({app="b"}[1m])', '(rate({app=~"a|b"}[1m]) and rate({app="b"}[1m]))'),
    ('rate({app=~"a|b"}[1m]) unless rate({app="b"}[1m])', '(rate({app=~"a|b"}[1m]) unless rate({app="b"}[1m]))'),
    ('label_replace(rate({app="api"}[5m]), "svc", "$1", "app", "(.*)-api")',
     'label_replace(rate({app="api"}[5m]),"svc","$1","app","(.*)-api")'),
    ('vector(1)', 'vector(1.000000)'),
    ('vector(0.5)', 'vector(0.500000)'),
    ('vector(1e3)', 'vector(1000.000000)'),
    ('2 ^ 3 ^ 2', '512'),
    ('(2 ^ 3) ^ 2', '64'),
    ('1 + 2 * 3', '7'),
    ('(1 + 2) * 3', '9'),
    ('1 > 1 < 1', '1'),
    ('2 > 1', '1'),
    ('2 > bool 3', '0'),
    ('10 % 3', '1'),
    ('-7 % 3', '-1'),
    ('-1 - -1', '0'),
    ('+5', '5'),
    ('-2 ^ 2', '4'),
    ('1e6', '1e+06'),
    ('123456', '123456'),
    ('0.00001', '1e-05'),
    ('0x1p-2', '0.25'),
    ('1_000', '1000'),
    ('010', '10'),
    ('1.5e3 / 3', '500'),
    ('vector(1) + vector(2) * vector(3)',
     '(vector(1.000000) + (vector(2.000000) * vector(3.000000)))'),
    ('vector(1) * vector(2) + vector(3)',
     '((vector(1.000000) * vector(2.000000)) + vector(3.000000))'),
    ('vector(1) ^ vector(2) ^ vector(3)',
     '(vector(1.000000) ^ (vector(2.000000) ^ vector(3.000000)))'),
    ('vector(1) - vector(2) - vector(3)',
     '((vector(1.000000) - vector(2.000000)) - vector(3.000000))'),
    ('vector(1) / vector(2) % vector(3)',
     '((vector(1.000000) / vector(2.000000)) % vector(3.000000))'),
    ('vector(1) or vector(2) and vector(3)',
     '(vector(1.000000) or (vector(2.000000) and vector(3.000000)))'),
    ('vector(1) and vector(2) unless vector(3)',
     '((vector(1.000000) and vector(2.000000)) unless vector(3.000000))'),
    ('vector(1) > vector(2) + vector(3)',
     '(vector(1.000000) > (vector(2.000000) + vector(3.000000)))'),
    ('vector(1) + vector(2) > vector(3) and vector(4)',
     '(((vector(1.000000) + vector(2.000000)) > vector(3.000000)) and vector(4.000000))'),
    ('vector(1) * 2 ^ 3', '(vector(1.000000) * 8)'),
    ('2 * 3 + vector(1)', '(6 + vector(1.000000))'),
    ('vector(1) + 2 * 3', '(vector(1.000000) + 6)'),
    ('(vector(1) + vector(2)) * vector(3)',
     '((vector(1.000000) + vector(2.000000)) * vector(3.000000))'),
    ('vector(1) == bool vector(2)', '(vector(1.000000) == bool vector(2.000000))'),
    ('vector(1) > on () vector(2)', '(vector(1.000000) > on ()  vector(2.000000))'),
    ('vector(1) + ignoring () vector(2)', '(vector(1.000000) + vector(2.000000))'),
    ('vector(1) + ignoring () group_left vector(2)',
     '(vector(1.000000) + ignoring () group_left vector(2.000000))'),
    ('vector(1) * on (a, b) group_left (c, d) vector(2)',
     '(vector(1.000000) * on (a,b) group_left (c,d) vector(2.000000))'),
    ('vector(1) * on (a) group_right () vector(2)',
     '(vector(1.000000) * on (a) group_right vector(2.000000))'),
    ('vector(1) > bool on (a) group_left vector(2)',
     '(vector(1.000000) > bool on (a) group_left vector(2.000000))'),
    ('vector(1) and ignoring (host) sum(rate({a="b"}[5m]))',
     '(vector(1.000000) and ignoring (host)  sum(rate({a="b"}[5m])))'),
    ('vector(1) + bool vector(2)', '(vector(1.000000) + bool vector(2.000000))'),
    ('vector(1)+vector(2)', '(vector(1.000000) + vector(2.000000))'),
    ('rate({a="b"}[5m]) - -1', '(rate({a="b"}[5m]) - -1)'),
    ('rate({a="b"}[5m]) - 5 - 1', '((rate({a="b"}[5m]) - 5) - 1)'),
    ('rate({a="b"}[5m]) * (1 + 1)', '(rate({a="b"}[5m]) * 2)'),
    ('label_replace(vector(1), "a", "b", "c", "d")', 'label_replace(vector(1.000000),"a","b","c","d")'),
    ('label_replace(sum(rate({a="b"}[5m])) by (x), "dst", "$1", "x", "")',
     'label_replace(sum by (x)(rate({a="b"}[5m])),"dst","$1","x","")'),
    ('sum(label_replace(rate({a="b"}[5m]), "d", "r", "s", "r.*"))',
     'sum(label_replace(rate({a="b"}[5m]),"d","r","s","r.*"))'),
    ('(rate({a="b"}[5m]))', 'rate({a="b"}[5m])'),
    ('((1))', '1'),
    ('sum by (a) (rate({a="b"}[5m])) / ignoring (a) group_left sum(rate({a="b"}[5m]))',
     '(sum by (a)(rate({a="b"}[5m])) / ignoring (a) group_left sum(rate({a="b"}[5m])))'),
]

# ---------------------------------------------------------------------------- templates

GEN: list[tuple[str, str]] = []

# every line filter operator with a plain and a raw string argument
for op in ("|=", "!=", "|~", "!~", "|>", "!>"):
    arg = "<_> x" if op in ("|>", "!>") else "x"
    GEN.append((f'{S} {op} "{arg}"', f'{S} {op} "{arg}"'))
    GEN.append((f'{S} {op} `{arg}`', f'{S} {op} "{arg}"'))
    GEN.append((f'{S}{op}"{arg}"', f'{S} {op} "{arg}"'))
for op in ("|=", "!="):
    for pat in ("10.0.0.1", "10.0.0.0/8", "::1", "2001:db8::/32", "10.0.0.1-10.0.0.9"):
        GEN.append((f'{S} {op} ip("{pat}")', f'{S} {op} ip("{pat}")'))

# every selector matcher operator
for op in ("=", "!=", "=~", "!~"):
    GEN.append((f'{{a="b", c{op}"d"}}', f'{{a="b", c{op}"d"}}'))
    GEN.append((f'{{a="b",c {op} `d`}}', f'{{a="b", c{op}"d"}}'))

# string label filters
for op in ("=", "!=", "=~", "!~"):
    GEN.append((f'{S} | x {op} "y"', f'{S} | x{op}"y"'))
# numeric label filters: value text → printed value
NUMS = [("5", "5"), ("-1.5", "-1.5"), ("+2", "2"), ("1e3", "1000"), ("0x1p4", "16"),
        ("1_000", "1000"), ("0.25", "0.25"), ("- 3", "-3")]
for op, printed in (("=", "=="), ("==", "=="), ("!=", "!="), (">", ">"), (">=", ">="),
                    ("<", "<"), ("<=", "<=")):
    for text, val in NUMS:
        GEN.append((f"{S} | x {op} {text}", f"{S} | x{printed}{val}"))
# duration label filters
DURS = [("250ms", "250ms"), ("1h30m", "1h30m0s"), ("-5s", "-5s"), ("1.5h", "1h30m0s"),
        ("2d", "48h0m0s"), ("10us", "10µs"), ("1m30s", "1m30s"), ("100ns", "100ns")]
for op, printed in (("=", "=="), ("!=", "!="), (">", ">"), ("<=", "<=")):
    for text, val in DURS:
        GEN.append((f"{S} | d {op} {text}", f"{S} | d{printed}{val}"))
# bytes label filters (printed with go-humanize SI units)
BYTES = [("5KB", "5.0kB"), ("5kB", "5.0kB"), ("5KiB", "5.1kB"), ("20MB", "20MB"),
         ("1.5GiB", "1.6GB"), ("1B", "1B"), ("10KB", "10kB"), ("200MiB", "210MB"), ("1TB", "1.0TB"),
         ("9B", "9B"), ("5k", "5.0kB"), ("3Ki", "3.1kB")]
for op, printed in ((">", ">"), ("==", "=="), ("<", "<")):
    for text, val in BYTES:
        GEN.append((f"{S} | size {op} {text}", f"{S} | size{printed}{val}"))

# range aggregations
NO_UNWRAP = ("count_over_time", "rate", "bytes_rate", "bytes_over_time", "absent_over_time")
WITH_UNWRAP = ("sum_over_time", "avg_over_time", "min_over_time", "max_over_time",
               "stdvar_over_time", "stddev_over_time", "first_over_time", "last_over_time",
               "rate_counter", "rate", "absent_over_time")
GROUPABLE = ("avg_over_time", "min_over_time", "max_over_time", "stdvar_over_time",
             "stddev_over_time", "first_over_time", "last_over_time")
for fn in NO_UNWRAP:
    GEN.append((f'{fn}({S}[5m])', f'{fn}({S}[5m])'))
    GEN.append((f'{fn}({S} |= "x" | json [1h])', f'{fn}({S} |= "x" | json[1h])'))
    GEN.append((f'{fn}({S}[5m] offset 5m)', f'{fn}({S}[5m] offset 5m0s)'))
for fn in WITH_UNWRAP:
    GEN.append((f'{fn}({S} | unwrap x [5m])', f'{fn}({S} | unwrap x[5m])'))
    GEN.append((f'{fn}({S} | logfmt | unwrap duration(x) [1m])',
                f'{fn}({S} | logfmt | unwrap duration(x)[1m])'))
for fn in GROUPABLE:
    GEN.append((f'{fn}({S} | unwrap x [5m]) by (a, b)', f'{fn}({S} | unwrap x[5m]) by (a,b)'))
    GEN.append((f'{fn}({S} | unwrap x [5m]) without (a)', f'{fn}({S} | unwrap x[5m]) without (a)'))
GEN.append((f'quantile_over_time(0.9, {S} | unwrap x [5m]) by (a)',
            f'quantile_over_time(0.9,{S} | unwrap x[5m]) by (a)'))

# vector aggregations
for fn in ("sum", "avg", "min", "max", "count", "stddev", "stdvar", "sort", "sort_desc"):
    GEN.append((f'{fn}({R})', f'{fn}({R})'))
    if fn not in ("sort", "sort_desc"):
        GEN.append((f'{fn} by (a) ({R})', f'{fn} by (a)({R})'))
        GEN.append((f'{fn}({R}) by (a, b)', f'{fn} by (a,b)({R})'))
        GEN.append((f'{fn} without (a) ({R})', f'{fn} without (a)({R})'))
        GEN.append((f'{fn}({R}) without (a)', f'{fn} without (a)({R})'))
for fn in ("topk", "bottomk"):
    GEN.append((f'{fn}(3, {R})', f'{fn}(3,{R})'))
    GEN.append((f'{fn} by (a) (3, {R})', f'{fn} by (a)(3,{R})'))
    GEN.append((f'{fn}(3, {R}) without (a)', f'{fn} without (a)(3,{R})'))

# binary operators between two metric expressions, with each modifier
ARITH = ("+", "-", "*", "/", "%", "^")
CMP = ("==", "!=", ">", ">=", "<", "<=")
SETOPS = ("and", "or", "unless")
for op in ARITH + CMP + SETOPS:
    GEN.append((f"{R} {op} {R2}", f"({R} {op} {R2})"))
    GEN.append((f"{R} {op} on (x) {R2}", f"({R} {op} on (x)  {R2})"))
    GEN.append((f"{R} {op} ignoring (x, y) {R2}", f"({R} {op} ignoring (x,y)  {R2})"))
for op in ARITH + CMP:
    GEN.append((f"{R} {op} 2", f"({R} {op} 2)"))
    GEN.append((f"2 {op} {R}", f"(2 {op} {R})"))
    GEN.append((f"{R} {op} on (x) group_left (y) {R2}", f"({R} {op} on (x) group_left (y) {R2})"))
    GEN.append((f"{R} {op} ignoring (x) group_right {R2}", f"({R} {op} ignoring (x) group_right {R2})"))
for op in CMP:
    GEN.append((f"{R} {op} bool 2", f"({R} {op} bool 2)"))
    GEN.append((f"{R} {op} bool on (x) {R2}", f"({R} {op} bool on (x)  {R2})"))

VALID = list(dict.fromkeys(HAND + GEN))

# Bytes filters print lossily (go-humanize, as Loki does): these do not parse back to the same
# value, only to the same text.
LOSSY = frozenset(q for q, _ in VALID if any(u in q for u in ("5KiB", "1.5GiB", "200MiB", "3Ki")))
