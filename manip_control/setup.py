from setuptools import find_packages, setup

package_name = 'manip_control'

setup(
    name=package_name,
    version='0.1.0',
    # The package directory itself is listed explicitly so that it is installed even before it has
    # an __init__.py; find_packages adds any subpackages.
    packages=sorted({package_name, *find_packages(exclude=['test', 'test.*'])}),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=False,
    maintainer='manip maintainers',
    maintainer_email='maintainers@manip-robotics.org',
    description='Joint-space and task-space controllers of the manip stack.',
    license='Apache-2.0',
    tests_require=['pytest'],
    entry_points={
        'console_scripts': [
            'controller = manip_control:controller_main',
            'manip-autotune = manip_control.autotune:main',
        ],
    },
)
