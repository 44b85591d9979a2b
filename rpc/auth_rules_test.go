package rpc

import (
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
)

// Every method of every service has an authorization rule, and every rule
// but the open ones (DescribeCluster, the lists) names what it needs: a
// method added to the proto without a rule is refused, and this test
// says which.
func TestEveryMethodHasAnAuthRule(t *testing.T) {
	open := map[string]bool{"DescribeCluster": true, "ListDatabases": true, "ListTables": true}
	services := flussv1.File_fluss_v1_fluss_proto.Services()
	if services.Len() != 3 {
		t.Fatalf("%d services, want Admin, Write and Read", services.Len())
	}
	for i := range services.Len() {
		methods := services.Get(i).Methods()
		for j := range methods.Len() {
			m := methods.Get(j)
			mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
			if err != nil {
				t.Fatal(err)
			}
			msg := mt.New().Interface()
			// Name a table and a database, so that rules that parse them pass.
			if f := m.Input().Fields().ByName("table"); f != nil {
				msg.ProtoReflect().Set(f, protoreflect.ValueOfString("shop.orders"))
			}
			if f := m.Input().Fields().ByName("name"); f != nil {
				msg.ProtoReflect().Set(f, protoreflect.ValueOfString("shop"))
			}
			op, _, _, err := required(msg)
			switch {
			case err != nil:
				t.Errorf("%s: %v", m.FullName(), err)
			case op == 0 && !open[string(m.Name())]:
				t.Errorf("%s is open to every user", m.FullName())
			case op != 0 && open[string(m.Name())]:
				t.Errorf("%s needs %s, want open", m.FullName(), op)
			}
		}
	}
	if _, _, _, err := required(&flussv1.AppendResponse{}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("a message without a rule: %v, want permission_denied", err)
	}
}
