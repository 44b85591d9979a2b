package tiering

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config names an S3-compatible bucket (AWS S3, MinIO, Ceph RGW, ...).
// Credentials come from the environment (AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, or MINIO_ROOT_USER and MINIO_ROOT_PASSWORD), the
// AWS credentials file, or the instance's IAM role, in that order: never
// from the config file.
type S3Config struct {
	Endpoint string // host[:port], e.g. s3.eu-central-1.amazonaws.com
	Bucket   string
	Prefix   string // object names start with it ("" or "fluss/...")
	Region   string // "" lets the client ask the server
	Insecure bool   // plain HTTP (a test or a private network)
}

// s3OpTimeout bounds one S3 request other than a segment's transfer.
const s3OpTimeout = 30 * time.Second

// s3TransferTimeout bounds the upload or download of one object.
const s3TransferTimeout = 10 * time.Minute

// S3Store is a Store in an S3-compatible bucket. Objects are read by
// downloading them whole into a local cache directory (a remote read
// opens a segment once and reads it many times); the file is removed when
// the Object is closed.
type S3Store struct {
	client   *minio.Client
	bucket   string
	prefix   string
	cache    string
	endpoint string
}

var _ Store = (*S3Store)(nil)

// NewS3Store returns a store in cfg's bucket that downloads into cacheDir
// (emptied first: files left by a crash are of no use). It does not talk
// to the server: Check does.
func NewS3Store(cfg S3Config, cacheDir string) (*S3Store, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, errors.New("tiering: S3 needs an endpoint and a bucket")
	}
	if cfg.Prefix != "" && (path.Clean(cfg.Prefix) != strings.TrimSuffix(cfg.Prefix, "/") || strings.HasPrefix(cfg.Prefix, "/")) {
		return nil, fmt.Errorf("tiering: bad S3 prefix %q", cfg.Prefix)
	}
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{}, &credentials.EnvMinio{}, &credentials.FileAWSCredentials{}, &credentials.IAM{},
	})
	client, err := minio.New(cfg.Endpoint, &minio.Options{Creds: creds, Secure: !cfg.Insecure, Region: cfg.Region})
	if err != nil {
		return nil, fmt.Errorf("tiering: S3 endpoint %s: %w", cfg.Endpoint, err)
	}
	if err := os.RemoveAll(cacheDir); err != nil {
		return nil, fmt.Errorf("tiering: cache directory: %w", err)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("tiering: cache directory: %w", err)
	}
	prefix := strings.TrimSuffix(cfg.Prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &S3Store{client: client, bucket: cfg.Bucket, prefix: prefix, cache: cacheDir, endpoint: cfg.Endpoint}, nil
}

// Check asks the server whether the bucket exists (and the credentials
// work).
func (s *S3Store) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s3OpTimeout)
	defer cancel()
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("tiering: S3 bucket %s at %s: %w", s.bucket, s.endpoint, err)
	}
	if !ok {
		return fmt.Errorf("tiering: S3 bucket %s does not exist at %s", s.bucket, s.endpoint)
	}
	return nil
}

func (s *S3Store) key(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	return s.prefix + name, nil
}

// noSuchKey reports S3's answer for a missing object.
func noSuchKey(err error) bool { return minio.ToErrorResponse(err).Code == "NoSuchKey" }

// Put uploads the size bytes of r. An S3 PUT is atomic: a reader sees the
// old object, or the new one whole. The size must be known: an upload of
// unknown length uses aws-chunked encoding, which not every S3-compatible
// server decodes.
func (s *S3Store) Put(name string, r io.Reader, size int64) error {
	key, err := s.key(name)
	if err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("tiering: put %s: the size must be known", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s3TransferTimeout)
	defer cancel()
	if _, err := s.client.PutObject(ctx, s.bucket, key, r, size, minio.PutObjectOptions{ContentType: "application/octet-stream"}); err != nil {
		return fmt.Errorf("tiering: put %s: %w", name, err)
	}
	return nil
}

// Open downloads name into the cache directory.
func (s *S3Store) Open(name string) (Object, error) {
	key, err := s.key(name)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(s.cache, "segment-*")
	if err != nil {
		return nil, fmt.Errorf("tiering: open %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s3TransferTimeout)
	defer cancel()
	size, err := s.download(ctx, key, f)
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("tiering: open %s: %w", name, err)
	}
	return cachedObject{dirObject{File: f, size: size}}, nil
}

func (s *S3Store) download(ctx context.Context, key string, f *os.File) (int64, error) {
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return 0, err
	}
	defer obj.Close()
	n, err := io.Copy(f, obj)
	if err != nil {
		if noSuchKey(err) {
			return 0, fmt.Errorf("%w: %v", os.ErrNotExist, err)
		}
		return 0, err
	}
	return n, nil
}

// cachedObject is a downloaded object; Close deletes its file.
type cachedObject struct{ dirObject }

func (o cachedObject) Close() error {
	err := o.File.Close()
	os.Remove(o.Name())
	return err
}

func (s *S3Store) List(dir string) ([]string, error) {
	key, err := s.key(dir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s3OpTimeout)
	defer cancel()
	var out []string
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: key + "/"}) {
		if o.Err != nil {
			return nil, fmt.Errorf("tiering: list %s: %w", dir, o.Err)
		}
		if name := strings.TrimPrefix(o.Key, s.prefix); !strings.HasSuffix(name, "/") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (s *S3Store) Delete(name string) error {
	key, err := s.key(name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s3OpTimeout)
	defer cancel()
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		if noSuchKey(err) {
			return nil
		}
		return fmt.Errorf("tiering: delete %s: %w", name, err)
	}
	return nil
}
